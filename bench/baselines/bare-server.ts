// Baseline for row 4: a bare Bun.serve answering a fixed JSON body, the most any Bun HTTP route can do here.
// Usage: bun bare-server.ts <body file>   Prints the port, then serves until killed.
import { readFileSync } from "node:fs";

const body = readFileSync(process.argv[2]!, "utf8");
const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response(body, { headers: { "content-type": "application/json" } }) });
console.log(server.port);
