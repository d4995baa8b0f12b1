// npm run bench: 100k track calls, ms per call (best and median of 5 runs).
// npm run bench -- <other dist dir> [runs]: the same for this build and another (for example main's,
// built with `node scripts/build.mjs /tmp/old`), alternating which goes first, `runs` (default 5)
// each, with the ratio of the medians.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { measure } from "./perf.mjs";

const other = process.argv[2];
const builds = [["this build", undefined]];
if (other) builds.push([other, (await import(pathToFileURL(resolve(other, "index.mjs")).href)).Client]);

const n = Math.max(1, +process.argv[3] || 5);
const runs = builds.map(() => []);
for (let i = 0; i < n; i++) {
  for (let j = 0; j < builds.length; j++) {
    const b = i % 2 ? builds.length - 1 - j : j;
    const r = await measure(100000, builds[b][1]);
    runs[b].push(r.msPerCall);
    console.log(`run ${i + 1}, ${builds[b][0]}: ${r.msPerCall.toFixed(5)} ms per track call (100000 calls, ${r.requests} requests, ${r.errors} errors)`);
  }
}
const med = runs.map((r) => [...r].sort((a, b) => a - b)[n >> 1]);
builds.forEach(([name], b) => {
  const s = [...runs[b]].sort((x, y) => x - y);
  console.log(`${name}: best ${s[0].toFixed(5)} ms, median ${med[b].toFixed(5)} ms per call; budget 0.05 ms`);
});
if (other) console.log(`ratio of medians (this build / ${other}): ${(med[0] / med[1]).toFixed(3)}`);
