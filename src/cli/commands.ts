import { Access } from "../access/access";
import type { Config } from "../config";
import { openStore } from "../store/open";
import { outboxRows } from "../webhooks/outbox";
import { UsageError, type Output } from "./errors";


/** Runs `fn` against the store (migrated, so the CLI works before a first serve). */
async function withAccess<T>(config: Config, fn: (access: Access) => Promise<T>): Promise<T> {
  const store = await openStore(config, { outbox: outboxRows });
  try {
    return await fn(new Access(store.access));
  } finally {
    await store.close();
  }
}

const need = (value: string | undefined, what: string) => {
  if (value === undefined) throw new UsageError(`missing ${what}`);
  return value;
};

// Arguments are checked before the database is opened: a mistyped command must not create a data directory.

// Both work on the store itself, as the server does, so they take the server's storage options (importd --help).
const storageOptions = `  Run on the server's machine, with its storage options: --data-dir <dir> (env IMPORTD_DATA_DIR; default ./data),
  or --database-url <postgres-url> (env IMPORTD_DATABASE_URL). Beside a running server too: changes take effect at once.`;

export const envUsage = `importd env: the environments, each with its own records, jobs and keys

  importd env create <slug>   create an environment (slug: a-z, 0-9, '-', up to 63 characters); its base URL is
                              http://<host>:<port>/<slug>. Then give it a key: importd key create <slug>
  importd env list            list the environments, with when each was created

${storageOptions}

  Exit code: 0 done, 1 refused (an environment that exists already, say), 2 usage errors.`;

export const keyUsage = `importd key: the API keys of an environment (sent as the Api-Key header, or importd import --api-key)

  importd key create <slug>   issue a key for the environment; prints the key alone on stdout (shown only this once)
  importd key list <slug>     list the environment's keys: ids and dates, never the secrets
  importd key revoke <keyId>  revoke a key (its id, from key list); takes effect at once, also on a running server

${storageOptions}

  Exit code: 0 done, 1 refused (no such environment or key, say), 2 usage errors.`;

export async function envCommand(config: Config, args: string[], io: Output): Promise<void> {
  const [action, slug] = args;
  if (action === "create") {
    const wanted = need(slug, "<slug>: importd env create <slug>");
    const environment = await withAccess(config, (access) => access.createEnvironment(wanted));
    io.out(`created environment ${environment.slug}`);
    io.err(`Next: importd key create ${environment.slug}   (base URL: http://<host>:<port>/${environment.slug})`);
  } else if (action === "list") {
    for (const environment of await withAccess(config, (access) => access.listEnvironments())) io.out(`${environment.slug}\t${environment.createdAt}`);
  } else {
    throw new UsageError(`unknown env command '${action ?? ""}': use env create <slug> or env list`);
  }
}

export async function keyCommand(config: Config, args: string[], io: Output): Promise<void> {
  const [action, target] = args;
  if (action === "create") {
    const slug = need(target, "<slug>: importd key create <slug>");
    // The key alone on stdout, so that scripts can capture it: KEY=$(importd key create acme-prod)
    io.out(await withAccess(config, (access) => access.createKey(slug)));
  } else if (action === "list") {
    const slug = need(target, "<slug>: importd key list <slug>");
    const keys = await withAccess(config, (access) => access.listKeys(slug));
    io.out("keyId\tcreatedAt\trevokedAt");
    for (const key of keys) io.out(`${key.keyId}\t${key.createdAt}\t${key.revokedAt ?? "-"}`);
  } else if (action === "revoke") {
    const text = need(target, "<keyId>: importd key revoke <keyId>");
    if (!/^[1-9][0-9]{0,15}$/.test(text) || !Number.isSafeInteger(Number(text))) {
      throw new UsageError(`'${text}' is not a key id (a positive whole number; see importd key list <slug>)`);
    }
    await withAccess(config, (access) => access.revokeKey(Number(text)));
    io.out(`revoked key ${text}`);
  } else {
    throw new UsageError(`unknown key command '${action ?? ""}': use key create <slug>, key list <slug> or key revoke <keyId>`);
  }
}

