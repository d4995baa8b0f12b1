// track() cost: N calls in a loop against a client whose requests go to a local mock API.
import { Client as Built } from "../dist/index.mjs";
import { startMock } from "./mock.mjs";

/** measure runs `calls` track calls and returns {msPerCall, errors, delivered}; Client defaults to
 * the built library (dist/), another build's Client may be passed to compare the two. */
export async function measure(calls = 100000, Client = Built) {
  const mock = await startMock(undefined, { light: true });
  const errors = [];
  const c = new Client({ apiUrl: mock.url, apiKey: "sk_bench", onError: (e) => errors.push(e) });
  // Warm up the JIT on a separate client so the measured one starts with an empty queue.
  const w = new Client({ apiUrl: mock.url, apiKey: "sk_bench", onError: (e) => errors.push(e) });
  for (let i = 0; i < 20000; i++) w.track({ userId: "u-" + (i % 1000), eventType: "product_viewed", payload: { sku: "SKU-" + i, price: 19.99 } });
  await w.shutdown();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) {
    c.track({ userId: "u-" + (i % 1000), eventType: "product_viewed", payload: { sku: "SKU-" + i, price: 19.99 } });
  }
  const ns = Number(process.hrtime.bigint() - t0);
  await c.shutdown();
  await mock.close();
  return { msPerCall: ns / 1e6 / calls, errors: errors.length, requests: mock.light || 0 };
}
