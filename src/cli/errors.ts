// What every command shares, kept apart from the commands themselves: main loads only the command it runs,
// so that `importd import` does not pay for loading the server.

/** A mistake in how a command was called: said in one line, exit code 2. */
export class UsageError extends Error {}

export type Output = { out: (line: string) => void; err: (line: string) => void };
