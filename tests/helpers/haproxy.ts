import { connect } from "node:net";

/** Debian installs haproxy in /usr/sbin, which is not on a regular user's PATH. */
export const haproxyBinary = Bun.which("haproxy", { PATH: `${process.env.PATH ?? ""}:/usr/sbin:/sbin` });

/** One command on HAProxy's admin socket, its whole answer. */
export const adminCommand = (socketPath: string, command: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = connect(socketPath);
    let answer = "";
    socket.on("data", (data) => (answer += data.toString()));
    socket.on("end", () => resolve(answer));
    socket.on("error", reject);
    socket.end(`${command}\n`);
  });

/** Each server of the `importd` backend in HAProxy's statistics, by name: status (UP, DOWN, MAINT…) and last check (L7OK…). */
export async function serverStates(socketPath: string): Promise<Record<string, { status: string; check: string }>> {
  const [header, ...rows] = (await adminCommand(socketPath, "show stat")).trim().split("\n");
  const columns = header!.replace(/^# /, "").split(",");
  const status = columns.indexOf("status");
  const check = columns.indexOf("check_status");
  return Object.fromEntries(
    rows
      .map((line) => line.split(","))
      .filter((fields) => fields[0] === "importd" && fields[1]!.startsWith("importd"))
      .map((fields) => [fields[1]!, { status: fields[status]!, check: fields[check]! }]),
  );
}
