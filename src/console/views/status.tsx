/** A job's status, coloured by what it means (and said in words, for those who do not see the colour). */
export function StatusBadge({ status }: { status: string }) {
  return <span class={`status status-${status.toLowerCase()}`}>{status}</span>;
}
