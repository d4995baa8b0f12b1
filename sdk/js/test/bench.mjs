// npm run bench: 100k track calls, ms per call (best and median of 5 runs).
import { measure } from "./perf.mjs";

const runs = [];
for (let i = 0; i < 5; i++) {
  const r = await measure(100000);
  runs.push(r.msPerCall);
  console.log(`run ${i + 1}: ${r.msPerCall.toFixed(5)} ms per track call (100000 calls, ${r.requests} requests, ${r.errors} errors)`);
}
runs.sort((a, b) => a - b);
console.log(`best ${runs[0].toFixed(5)} ms, median ${runs[2].toFixed(5)} ms per call; budget 0.05 ms`);
