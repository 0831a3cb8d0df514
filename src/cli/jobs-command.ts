import { parseArgs } from "node:util";
import { createClient, ImportdConnectionError, ImportdProblem } from "../client";
import { UsageError, type Output } from "./errors";
import { connectionFlags, connectionUsage, serverConnection } from "./server-connection";

export const jobsUsage = `importd jobs cancel <id> --base-url <url> [--api-key <key>] [--ca-file <file>]

  Cancels a job that is still Pending: it ends Failed at once, with nothing applied. A job that is being
  applied (Processing) or has finished cannot be canceled; the command says which it is.

${connectionUsage}

  Exit code: 0 canceled (or canceled already), 1 not cancelable or no such job, 2 usage or connection errors.`;

/** \`importd jobs\`: the jobs of a running server, through its API, like \`importd import\`. */
export async function jobsCommand(argv: string[], env: Record<string, string | undefined>, io: Output): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...connectionFlags, help: { type: "boolean", short: "h" } },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return io.out(jobsUsage), 0;
  const [action, idText, ...rest] = positionals;
  if (action !== "cancel") throw new UsageError(`unknown jobs command '${action ?? ""}': use jobs cancel <id>`);
  if (!idText || rest.length > 0 || !/^[1-9][0-9]{0,14}$/.test(idText)) throw new UsageError(`jobs cancel takes one job id (a positive whole number)${idText ? `, not '${[idText, ...rest].join(" ")}'` : ""}`);
  const connection = serverConnection(values, env);

  try {
    const job = await createClient({ ...connection, retries: 2 }).cancelJob(Number(idText));
    io.out(`job ${job.id}: ${job.importJobStatus}. ${job.output?.message ?? ""}`.trim());
    return 0;
  } catch (error) {
    if (error instanceof ImportdProblem && (error.status === 409 || error.status === 404)) {
      io.err(`importd: job ${idText} ${error.status === 409 ? "cannot be canceled" : "was not found"}: ${error.detail}`);
      return 1;
    }
    if (error instanceof ImportdProblem) throw new UsageError(`job ${idText}: ${error.status} ${error.title}: ${error.detail ?? ""}`.trim());
    if (error instanceof ImportdConnectionError) throw new UsageError(error.message);
    throw error;
  }
}
