import { Access } from "../access/access";
import type { Config } from "../config";
import { openStore } from "../store/open";
import { UsageError, type Output } from "./errors";


/** Runs `fn` against the store (migrated, so the CLI works before a first serve). */
async function withAccess<T>(config: Config, fn: (access: Access) => Promise<T>): Promise<T> {
  const store = await openStore(config);
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

