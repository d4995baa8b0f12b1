// track() must stay under 0.05 ms per call (100k calls). The machine is shared and noisy: the
// best of up to 3 runs counts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { measure } from "./perf.mjs";

test("track costs < 0.05 ms per call over 100k calls", async () => {
  let best = Infinity;
  for (let i = 0; i < 3 && best >= 0.05; i++) {
    const r = await measure(100000);
    assert.equal(r.errors, 0);
    assert.ok(r.requests >= 200, `${r.requests} requests for 100k events (at most 500 per request)`);
    best = Math.min(best, r.msPerCall);
    console.log(`run ${i + 1}: ${r.msPerCall.toFixed(5)} ms per call, ${r.requests} requests`);
  }
  assert.ok(best < 0.05, `best ${best} ms per call`);
});
