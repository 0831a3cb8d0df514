// How the client commands (import, jobs) reach a server: its environment's base URL, a key, and for HTTPS the
// certificate to trust when the system's store does not (importd's own self-signed one, a private authority's).
import { readFileSync } from "node:fs";
import type { ClientOptions } from "../client";
import { UsageError } from "./errors";

/** The flags, for parseArgs. */
export const connectionFlags = { "base-url": { type: "string" }, "api-key": { type: "string" }, "ca-file": { type: "string" } } as const;

export const connectionUsage = `  --base-url <url>        the environment's base URL, e.g. http://localhost:8080/default (env IMPORTD_BASE_URL)
  --api-key <key>         a key of that environment (env IMPORTD_API_KEY)
  --ca-file <file>        for https://: the certificate to trust instead of the system's store, the server's own
                          (importd tls fingerprint on the server shows its fingerprint) or the authority that
                          signed it, PEM (env IMPORTD_CA_FILE)`;

/** The server to reach, from the flags, then IMPORTD_* variables; a usage error names what is missing or wrong. */
export function serverConnection(values: { "base-url"?: string; "api-key"?: string; "ca-file"?: string }, env: Record<string, string | undefined>): Pick<ClientOptions, "baseUrl" | "apiKey" | "ca"> {
  const baseUrl = values["base-url"] ?? env.IMPORTD_BASE_URL ?? "";
  const apiKey = values["api-key"] ?? env.IMPORTD_API_KEY ?? "";
  const caFile = values["ca-file"] ?? (env.IMPORTD_CA_FILE || undefined);
  if (!/^https?:\/\/[^/]+\/[^/]+\/?$/.test(baseUrl)) throw new UsageError(`--base-url must be an environment's base URL such as http://localhost:8080/default${baseUrl ? `, not '${baseUrl}'` : ""}`);
  if (apiKey === "") throw new UsageError("no API key: pass --api-key or set IMPORTD_API_KEY");
  return { baseUrl, apiKey, ca: caFile === undefined ? undefined : certificates(caFile) };
}

function certificates(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new UsageError(`--ca-file ${path} cannot be read: ${(error as { code?: string }).code === "ENOENT" ? "no such file" : (error as Error).message}`);
  }
  if (!text.includes("-----BEGIN CERTIFICATE-----")) throw new UsageError(`--ca-file ${path} holds no PEM certificate ("-----BEGIN CERTIFICATE-----"): give the server's certificate file, not its key`);
  return text;
}

/**
 * The answer to a 401, for every client command. importd answers 401 alike for a wrong key and for an environment
 * that does not exist, so that keys cannot be used to find which environments exist: the message names both.
 */
export function keyRefused(baseUrl: string): string {
  const environment = new URL(baseUrl).pathname.split("/").filter(Boolean).at(-1);
  return (
    `the server refused the API key (401): the key is wrong or revoked, or there is no environment '${environment}' (the end of --base-url); importd answers both alike. ` +
    `Check the name (importd env list, on the server) and use a key of that environment (importd key list ${environment}).`
  );
}
