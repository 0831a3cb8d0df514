// Polls one status URL from `connections` concurrent loops until stdin closes, then prints every poll as one JSON
// line: its latency (ms) and when it was sent (epoch ms, so that the benchmark can keep the polls of a window).
// Its own process, so that the benchmark's uploads and downloads do not delay its clock.
// Usage: bun poller.ts <url> <api key> <connections>
export {};
const [url, key, connections] = process.argv.slice(2);
const latencies: number[] = [];
const sentAt: number[] = [];
let running = true;
const loops = Array.from({ length: Number(connections) }, async () => {
  while (running) {
    const start = performance.now();
    const response = await fetch(url!, { headers: { "api-key": key! } });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`poll answered ${response.status}`);
    latencies.push(performance.now() - start);
    sentAt.push(performance.timeOrigin + start);
  }
});
// Anything on stdin, or its end, stops the loops.
await Bun.stdin.stream().getReader().read();
running = false;
await Promise.all(loops);
console.log(JSON.stringify({ latencies, sentAt }));
