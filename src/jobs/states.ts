// The job states live in domain/job.ts, at the bottom of the import graph, since the store needs them too. This
// re-export is for the route modules (http/routes/imports.ts, jobs.ts), which are being rewritten as this moves
// (issue 48): they import from domain/job.ts once that lands, and this file goes.
export { isTerminal, JobStatus, jobStatuses, terminalStatuses } from "../domain/job";
