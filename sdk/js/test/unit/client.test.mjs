// Unit tests of the built library (dist/index.mjs) against a local node:http mock of the API.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "../../dist/index.mjs";
import { startMock, sleep, until, BATCH, SESSION } from "../mock.mjs";

const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function client(mock, opts = {}) {
  const errors = [];
  const c = new Client({ apiUrl: mock.url + "/", apiKey: "sk_test", flushInterval: 60000, onError: (e) => errors.push(e), retryDelay: 20, ...opts });
  return { c, errors };
}

function ev(i, extra = {}) {
  return { userId: "u-" + i, eventType: "order_completed", payload: { i }, ...extra };
}

test("batches by count: nothing sent before batchSize events, then one request per batch", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c, errors } = client(mock, { batchSize: 5 });
  for (let i = 0; i < 4; i++) c.track(ev(i));
  await sleep(100);
  assert.equal(mock.batches().length, 0, "4 of 5 events must not be sent yet");
  c.track(ev(4));
  await until(() => mock.batches().length === 1, 2000, "the first batch");
  assert.equal(mock.batches()[0].json.events.length, 5);
  assert.equal(mock.batches()[0].headers.authorization, "ApiKey sk_test");
  await c.shutdown();
  assert.deepEqual(errors, []);
});

test("minimum number of requests: N events with batchSize B take at most ceil(N/B) requests, each event once", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c, errors } = client(mock, { batchSize: 20 });
  // One burst (a request is in flight while the rest queue up) ...
  for (let i = 0; i < 100; i++) c.track(ev(i));
  await c.flush();
  assert.ok(mock.batches().length <= 5, `burst of 100: ${mock.batches().length} requests, want <= 5`);
  // ... and events arriving one batch at a time: exactly N/B requests of B events.
  const before = mock.batches().length;
  for (let b = 0; b < 3; b++) {
    for (let i = 0; i < 20; i++) c.track(ev(1000 + b * 20 + i));
    await until(() => mock.batches().length === before + b + 1, 2000, "batch " + b);
  }
  await c.flush();
  const later = mock.batches().slice(before);
  assert.deepEqual(later.map((r) => r.json.events.length), [20, 20, 20]);
  const ids = mock.events().map((e) => e.message_id);
  assert.equal(ids.length, 160);
  assert.equal(new Set(ids).size, 160, "every event exactly once");
  assert.deepEqual(errors, []);
});

test("batches by bytes: a request stays under 512 KiB", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c, errors } = client(mock, { batchSize: 20 });
  const big = "x".repeat(30 * 1024);
  for (let i = 0; i < 20; i++) c.track(ev(i, { payload: { big } }));
  await c.flush();
  const sizes = mock.batches().map((r) => Buffer.byteLength(r.body));
  assert.equal(mock.events().length, 20);
  assert.ok(sizes.length >= 2, `20 x 30 KiB in ${sizes.length} request(s): must be split`);
  for (const s of sizes) assert.ok(s <= 512 * 1024 + 20 * 64, `request of ${s} bytes`);
  assert.deepEqual(errors, []);
});

test("batches by interval: a partial batch goes out after flushInterval", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c } = client(mock, { batchSize: 100, flushInterval: 300 });
  const start = Date.now();
  c.track(ev(1));
  c.track(ev(2));
  await sleep(150);
  assert.equal(mock.batches().length, 0);
  await until(() => mock.batches().length === 1, 2000, "the interval flush");
  const took = mock.batches()[0].at - start;
  assert.ok(took >= 280 && took < 1500, `sent after ${took} ms, want about 300`);
  assert.equal(mock.batches()[0].json.events.length, 2);
  await c.shutdown();
});

test("event shape: message_id is UUIDv7 and increasing, occurred_at and sent_at on every event", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c } = client(mock, { batchSize: 500 });
  const t0 = Date.now();
  for (let i = 0; i < 1200; i++) c.track(ev(i));
  c.track(ev("x", { occurredAt: "2024-05-01T12:00:00Z" }));
  await c.flush();
  const events = mock.events();
  assert.equal(events.length, 1201);
  let prev = "";
  for (const e of events) {
    assert.match(e.message_id, UUID7);
    assert.ok(e.message_id > prev, `${e.message_id} after ${prev}`);
    prev = e.message_id;
    assert.ok(!Number.isNaN(Date.parse(e.occurred_at)) && !Number.isNaN(Date.parse(e.sent_at)));
    assert.equal(e.event_type, "order_completed");
  }
  const ms = parseInt(events[0].message_id.replace(/-/g, "").slice(0, 12), 16);
  assert.ok(Math.abs(ms - t0) < 5000, "the id's timestamp is the time of the call");
  assert.equal(events[1200].occurred_at, "2024-05-01T12:00:00.000Z");
  for (const r of mock.batches()) {
    const sent = new Set(r.json.events.map((e) => e.sent_at));
    assert.equal(sent.size, 1, "one sent_at per request");
  }
});

test("retries a 503 after Retry-After with the same message ids, then succeeds", async (t) => {
  let calls = 0;
  const mock = await startMock((r) => (r.path === BATCH && ++calls === 1 ? { status: 503, headers: { "Retry-After": "1" }, body: { error: { code: "unavailable", message: "busy" } } } : undefined));
  t.after(() => mock.close());
  const { c, errors } = client(mock, { retryDelay: 5 });
  c.track(ev(1));
  c.track(ev(2));
  await c.flush();
  const [a, b] = mock.batches();
  assert.equal(mock.batches().length, 2);
  assert.ok(b.at - a.at >= 950, `retried after ${b.at - a.at} ms, Retry-After said 1 s`);
  assert.deepEqual(b.json.events.map((e) => e.message_id), a.json.events.map((e) => e.message_id));
  assert.ok(b.json.events[0].sent_at > a.json.events[0].sent_at, "sent_at is the retry's");
  assert.deepEqual(errors, []);
});

test("retries 429 and 408 and a killed connection with backoff; gives up after maxRetries and reports", async (t) => {
  const answers = [{ status: 429, body: {} }, { status: 408, body: {} }, "destroy"];
  let i = 0;
  const mock = await startMock((r) => (r.path === BATCH && i < answers.length ? answers[i++] : undefined));
  t.after(() => mock.close());
  const { c, errors } = client(mock, { retryDelay: 10 });
  c.track(ev(1));
  await c.flush();
  assert.equal(mock.batches().length, 4);
  assert.equal(new Set(mock.batches().map((r) => r.json.events[0].message_id)).size, 1, "same message id on every attempt");
  assert.deepEqual(errors, []);

  const down = await startMock((r) => (r.path === BATCH ? { status: 500, body: { error: { code: "internal", message: "boom" } } } : undefined));
  t.after(() => down.close());
  const d = client(down, { retryDelay: 1, maxRetries: 3 });
  d.c.track(ev(1));
  await d.c.flush();
  assert.equal(down.batches().length, 4, "first attempt + 3 retries");
  assert.equal(d.errors.length, 1);
  assert.equal(d.errors[0].status, 500);
  assert.equal(d.errors[0].events, 1);
});

test("no retry on 400: the events are dropped and onError is called", async (t) => {
  const mock = await startMock((r) => (r.path === BATCH ? { status: 400, body: { error: { code: "invalid_json", message: "bad" } } } : undefined));
  t.after(() => mock.close());
  const { c, errors } = client(mock);
  c.track(ev(1));
  c.track(ev(2));
  await c.flush();
  await sleep(100);
  assert.equal(mock.batches().length, 1);
  assert.equal(errors.length, 1);
  assert.equal(errors[0].status, 400);
  assert.equal(errors[0].code, "invalid_json");
  assert.equal(errors[0].events, 2);
  assert.ok(errors[0] instanceof Error);
});

test("onError: events the server skipped, invalid calls, a throwing handler does not break tracking", async (t) => {
  const mock = await startMock((r) =>
    r.path === BATCH ? { status: 202, body: { queued: 1, skipped: 1, errors: [{ index: 1, code: "invalid_payload", message: "payload: bad" }] } } : undefined,
  );
  t.after(() => mock.close());
  const { c, errors } = client(mock);
  c.track(ev(1));
  c.track(ev(2));
  await c.flush();
  assert.equal(errors.length, 1);
  assert.equal(errors[0].code, "invalid_payload");
  assert.equal(errors[0].events, 1);
  assert.match(errors[0].message, /events\[1\] invalid_payload/);

  c.track({ userId: "", eventType: "x" });
  c.track({ userId: "u", eventType: "Order Completed" });
  c.track({ userId: "u", eventType: "x", payload: [1] });
  const cyclic = {};
  cyclic.self = cyclic;
  c.track({ userId: "u", eventType: "x", payload: cyclic });
  assert.equal(errors.length, 5);

  const thrower = new Client({ apiUrl: mock.url, apiKey: "sk_x", onError: () => { throw new Error("handler"); } });
  assert.doesNotThrow(() => thrower.track({ userId: "", eventType: "x" }));
  await thrower.shutdown();
});

test("shutdown flushes what is queued and stops the timer; later events are refused", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c, errors } = client(mock, { batchSize: 20, flushInterval: 100 });
  c.track(ev(1));
  c.identify({ userId: "u-1", traits: { plan: "pro" } });
  c.track(ev(3));
  await c.shutdown();
  const events = mock.events();
  assert.equal(events.length, 3);
  assert.equal(events[1].event_type, "context_identified");
  assert.deepEqual(events[1].payload, { plan: "pro" });
  c.track(ev(4));
  await sleep(250);
  assert.equal(mock.events().length, 3);
  assert.equal(errors.length, 1);
  assert.match(errors[0].message, /shut down/);
});

test("batch: false sends every event immediately, one request each", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c } = client(mock, { batch: false });
  c.track(ev(1));
  c.track(ev(2));
  c.track(ev(3));
  await until(() => mock.batches().length === 3, 2000, "3 requests");
  assert.deepEqual(mock.batches().map((r) => r.json.events.length), [1, 1, 1]);
  await c.shutdown();
});

test("pk_ key: handshake with the user context (signed ids passed through), token reused", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c, errors } = client(mock, {
    apiKey: "pk_test",
    getUser: () => ({ userId: "u-7", anonymousId: "anon-1", userIdSig: "ab12", userIdTs: 1700000000 }),
  });
  c.track(ev(1));
  await c.flush();
  c.track(ev(2));
  await c.flush();
  assert.equal(mock.sessions().length, 1, "one handshake for two flushes");
  const s = mock.sessions()[0];
  assert.equal(s.headers.authorization, "ApiKey pk_test");
  assert.deepEqual(s.json, { user_id: "u-7", anonymous_id: "anon-1", user_id_sig: "ab12", user_id_ts: 1700000000 });
  for (const b of mock.batches()) assert.equal(b.headers.authorization, "Bearer tok-1");
  assert.equal(mock.events().length, 2);
  assert.deepEqual(errors, []);
});

test("pk_ key: 401 gets a new token and the request is retried once", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c, errors } = client(mock, { apiKey: "pk_test" });
  c.track(ev(1));
  await c.flush();
  mock.tokens.clear(); // the server no longer accepts tok-1
  c.track(ev(2));
  await c.flush();
  const b = mock.batches();
  assert.equal(b.length, 3);
  assert.equal(b[1].headers.authorization, "Bearer tok-1");
  assert.equal(b[2].headers.authorization, "Bearer tok-2");
  assert.equal(b[2].json.events[0].message_id, b[1].json.events[0].message_id);
  assert.equal(mock.sessions().length, 2);
  assert.deepEqual(errors, []);

  // A second 401 in a row: reported, not retried again.
  const always = await startMock((r) => (r.path === BATCH ? { status: 401, body: { error: { code: "unauthenticated", message: "expired" } } } : undefined));
  t.after(() => always.close());
  const a = client(always, { apiKey: "pk_test" });
  a.c.track(ev(1));
  await a.c.flush();
  assert.equal(always.batches().length, 2, "one retry after the new token");
  assert.equal(always.sessions().length, 2);
  assert.equal(a.errors.length, 1);
  assert.equal(a.errors[0].status, 401);
});

test("pk_ key: the token is refreshed before it expires", async (t) => {
  const mock = await startMock();
  mock.expiresIn = 4; // refreshed when less than a fifth of its life (0.8 s) is left
  t.after(() => mock.close());
  const { c, errors } = client(mock, { apiKey: "pk_test" });
  c.track(ev(1));
  await c.flush();
  await sleep(1000);
  c.track(ev(2));
  await c.flush();
  assert.equal(mock.sessions().length, 1, "still fresh after 1 s");
  await sleep(2400);
  c.track(ev(3));
  await c.flush();
  assert.equal(mock.sessions().length, 2, "refreshed at 3.4 s of 4 s");
  assert.equal(mock.batches()[2].headers.authorization, "Bearer tok-2");
  assert.equal(mock.batches().length, 3, "no request was refused");
  assert.deepEqual(errors, []);
});

test("pk_ key: a failing handshake is retried, then reported", async (t) => {
  let n = 0;
  const mock = await startMock((r) => (r.path === SESSION && ++n <= 2 ? { status: 503, body: {} } : undefined));
  t.after(() => mock.close());
  const { c, errors } = client(mock, { apiKey: "pk_test" });
  c.track(ev(1));
  await c.flush();
  assert.equal(mock.sessions().length, 3);
  assert.equal(mock.events().length, 1);
  assert.deepEqual(errors, []);

  const refused = await startMock((r) => (r.path === SESSION ? { status: 401, body: { error: { code: "bad_signature", message: "user_id_sig does not match" } } } : undefined));
  t.after(() => refused.close());
  const x = client(refused, { apiKey: "pk_test" });
  x.c.track(ev(1));
  await x.c.flush();
  assert.equal(refused.batches().length, 0);
  assert.equal(x.errors.length, 1);
  assert.equal(x.errors[0].code, "bad_signature");
});

test("trackPageView is a no-op outside a browser", async (t) => {
  const mock = await startMock();
  t.after(() => mock.close());
  const { c, errors } = client(mock);
  c.trackPageView({ userId: "u", path: "/x" });
  c.trackPageView();
  await c.shutdown();
  assert.equal(mock.reqs.length, 0);
  assert.deepEqual(errors, []);
});

test("constructor: apiUrl and apiKey are required", () => {
  assert.throws(() => new Client({ apiUrl: "", apiKey: "sk_x" }), TypeError);
  assert.throws(() => new Client({ apiUrl: "http://x" }), TypeError);
});
