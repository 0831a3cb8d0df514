// The thread a scheduled backup runs in (backup-schedule.ts): VACUUM INTO is one synchronous call that reads the whole
// database, seconds for a large one, which on the server's HTTP thread would hold every request, imports' 202s too.
// One message in (where from, where to), one out (the report, or why it failed); then the thread is ended.
import { backupDatabase, type BackupReport } from "./backup";

declare const self: Worker;

export type BackupAsk = { dataDir: string; target: string };
export type BackupAnswer = { type: "done"; report: BackupReport } | { type: "failed"; message: string };

self.onmessage = (event: MessageEvent<BackupAsk>) => {
  let answer: BackupAnswer;
  try {
    answer = { type: "done", report: backupDatabase(event.data.dataDir, event.data.target) };
  } catch (error) {
    answer = { type: "failed", message: (error as Error)?.message ?? String(error) };
  }
  self.postMessage(answer);
};
