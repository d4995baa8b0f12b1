// The library in a real browser: flush on page hide, persisted events sent on the next load, the
// AI referral event, the sk_ warning.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { start } from "./harness.mjs";
import { until, sleep, BATCH } from "../mock.mjs";

let h;
before(async () => {
  h = await start();
});
after(async () => {
  if (h) await h.close();
});

const ids = (events) => events.map((e) => e.message_id);

test("page hide: the queue is delivered by a keepalive request that carries the session token", async () => {
  const { mock, context, pageUrl } = h;
  const page = await context.newPage();
  await page.goto(pageUrl());
  // A first event and flush: the page then holds a session token (a beacon cannot wait for one).
  await page.evaluate(() => client.track({ userId: "u-1", eventType: "warm_up" }));
  await page.evaluate(() => client.flush());
  assert.equal(mock.batches().length, 1);
  const seen = mock.reqs.length;
  await page.evaluate(() => {
    for (let i = 0; i < 3; i++) client.track({ userId: "u-1", eventType: "item_viewed", payload: { i } });
  });
  await sleep(200);
  assert.equal(mock.batches().length, 1, "nothing sent before the page is hidden");
  await page.close({ runBeforeUnload: true });
  await until(() => mock.batches().length === 2, 5000, "the page-hide flush");
  const b = mock.batches()[1];
  assert.equal(b.json.events.length, 3);
  assert.ok(b.json.session_token, "session token in the body");
  assert.equal(b.headers.authorization, undefined);
  assert.match(b.headers["content-type"], /^text\/plain/);
  assert.deepEqual(b.json.events.map((e) => e.payload.i), [0, 1, 2]);
  assert.equal(mock.reqs.slice(seen).filter((r) => r.method === "OPTIONS" && r.path === BATCH).length, 0, "no preflight before the beacon");

  // The next load in a new tab finds nothing left to send: no event is sent twice.
  const next = await context.newPage();
  await next.goto(pageUrl());
  await sleep(1000);
  assert.equal(mock.batches().length, 2);
  await next.close();
});

test("reload: events that could not be sent (offline) are persisted and sent once on the next load", async () => {
  const { mock, context, pageUrl } = h;
  const before = mock.events().length;
  const page = await context.newPage();
  page.on("console", (m) => process.env.DEBUG && console.log("page:", m.text()));
  await page.goto(pageUrl());
  await page.evaluate(() => client.track({ userId: "u-1", eventType: "warm_up" }));
  await page.evaluate(() => client.flush());
  const warm = mock.events().length;
  assert.equal(warm, before + 1);

  await context.setOffline(true);
  await page.evaluate(() => {
    for (let i = 0; i < 4; i++) client.track({ userId: "u-1", eventType: "offline_event", payload: { i } });
    client.flush(); // fails (offline) and backs off
  });
  await sleep(200);
  const stored = await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith("cohort_q_")).map((k) => JSON.parse(localStorage.getItem(k)).e.length));
  assert.deepEqual(stored, [4], "the 4 events are in localStorage");
  await page.goto("about:blank"); // page hidden while offline: nothing can go out
  await context.setOffline(false);
  assert.equal(mock.events().length, warm, "nothing was sent while offline");

  await page.goto(pageUrl()); // the next load
  await until(() => mock.events().length === warm + 4, 5000, "the persisted events");
  const sent = mock.events().slice(warm);
  assert.deepEqual(sent.map((e) => e.payload.i), [0, 1, 2, 3]);
  await sleep(1500); // the old page's retries, had they survived, would show up now
  assert.equal(mock.events().length, warm + 4, "sent exactly once");
  assert.equal(new Set(ids(mock.events())).size, mock.events().length, "no message_id twice");
  const left = await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith("cohort_q_")).length);
  assert.equal(left, 0, "storage emptied once delivered");
  await page.close();
});

test("ai_referral_session fires for a chatgpt.com referrer (and for utm_source)", async () => {
  const { mock, context, pageUrl } = h;
  const before = mock.events().length;
  const page = await context.newPage();
  await page.goto(pageUrl("?pv=1&q=trail+shoes"), { referer: "https://chatgpt.com/" });
  await page.evaluate(() => client.flush());
  const events = mock.events().slice(before);
  assert.deepEqual(events.map((e) => e.event_type), ["page_viewed", "ai_referral_session"]);
  assert.deepEqual(events[0].payload, { path: "/page", url: pageUrl("?pv=1&q=trail+shoes"), referrer: "https://chatgpt.com/", title: "Cohort test page" });
  assert.equal(events[0].user_id, "u-1");
  const ai = events[1].payload;
  assert.equal(ai.source_provider, "chatgpt");
  assert.equal(ai.referrer_url, "https://chatgpt.com/");
  assert.equal(ai.landing_url, pageUrl("?pv=1&q=trail+shoes"));
  assert.equal(ai.query_hint, "trail shoes");
  await page.close();

  const utm = await context.newPage();
  await utm.goto(pageUrl("?pv=1&utm_source=perplexity.ai"));
  await utm.evaluate(() => client.flush());
  const last = mock.events().slice(-2);
  assert.deepEqual(last.map((e) => e.event_type), ["page_viewed", "ai_referral_session"]);
  assert.equal(last[1].payload.source_provider, "perplexity");
  await utm.close();

  const plain = await context.newPage();
  const n = mock.events().length;
  await plain.goto(pageUrl("?pv=1"), { referer: "https://www.google.com/" });
  await plain.evaluate(() => client.flush());
  assert.deepEqual(mock.events().slice(n).map((e) => e.event_type), ["page_viewed"]);
  await plain.close();
});

test("a secret key in a browser prints a console warning", async () => {
  const { context, pageUrl } = h;
  const page = await context.newPage();
  const messages = [];
  page.on("console", (m) => messages.push([m.type(), m.text()]));
  await page.goto(pageUrl("?key=sk_live_123"));
  await until(() => messages.some(([t]) => t === "warning"), 3000, "the warning");
  const warn = messages.find(([t]) => t === "warning");
  assert.match(warn[1], /secret key \(sk_\)/);
  await page.close();

  const pk = await context.newPage();
  const quiet = [];
  pk.on("console", (m) => quiet.push(m.type()));
  await pk.goto(pageUrl("?key=pk_test"));
  await sleep(200);
  assert.ok(!quiet.includes("warning"), "no warning for a public key");
  await pk.close();
});

test("hidden tab (visibilitychange): keepalive chunks stay within the 64 KB budget; the rest goes on the next load", async () => {
  const { mock, context, pageUrl } = h;
  const before = mock.batches().length;
  const sessions = mock.sessions().length;
  const page = await context.newPage();
  await page.goto(pageUrl("?bs=100"));
  await page.evaluate(() => {
    const pad = "x".repeat(5000);
    for (let i = 0; i < 30; i++) client.track({ userId: "u-1", eventType: "big_event", payload: { i, pad } });
  });
  await until(() => mock.sessions().length > sessions, 5000, "the handshake");
  await sleep(100);
  await page.evaluate(() => {
    Object.defineProperty(document, "visibilityState", { value: "hidden", configurable: true });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  await until(() => mock.batches().length > before, 5000, "the keepalive flush");
  await sleep(300);
  const beacons = mock.batches().slice(before);
  const bytes = beacons.reduce((n, r) => n + Buffer.byteLength(r.body), 0);
  assert.ok(bytes <= 64 * 1024, `${bytes} bytes of keepalive bodies`);
  const first = beacons.flatMap((r) => r.json.events.map((e) => e.payload.i));
  assert.ok(first.length > 0 && first.length < 30, `${first.length} of 30 events fit the budget`);
  await page.close();

  const next = await context.newPage();
  await next.goto(pageUrl());
  await until(() => mock.batches().slice(before).flatMap((r) => r.json.events).length >= 30, 5000, "the rest on the next load");
  await sleep(300);
  const all = mock.batches().slice(before).flatMap((r) => r.json.events.map((e) => e.payload.i));
  assert.deepEqual([...all].sort((a, b) => a - b), Array.from({ length: 30 }, (_, i) => i), "each event once");
  await next.close();
});

test("two tabs: a live tab's stored events are not taken by another tab; each event is sent once", async () => {
  const { mock, context, pageUrl } = h;
  const before = mock.events().length;
  let refused = 0;
  mock.override = (r) =>
    r.path === BATCH && r.method === "POST" && r.json && r.json.events.some((e) => e.event_type === "tab_a") && refused++ === 0
      ? { status: 503, headers: { "Retry-After": "4" }, body: { error: { code: "unavailable", message: "busy" } } }
      : undefined;
  try {
    const a = await context.newPage();
    await a.goto(pageUrl());
    await a.evaluate(() => {
      client.track({ userId: "u-1", eventType: "tab_a" });
      client.flush(); // 503, retried in 4 s: meanwhile stored under tab A's key
    });
    await until(() => refused === 1, 5000, "the refused request");
    const b = await context.newPage();
    await b.goto(pageUrl());
    await b.evaluate(() => client.track({ userId: "u-1", eventType: "tab_b" }));
    await b.evaluate(() => client.flush());
    let sent = mock.events().slice(before).map((e) => e.event_type);
    assert.deepEqual(sent, ["tab_b"], "tab B sent only its own event");
    await until(() => mock.events().slice(before).length === 2, 8000, "tab A's retry");
    await sleep(300);
    sent = mock.events().slice(before).map((e) => e.event_type);
    assert.deepEqual(sent, ["tab_b", "tab_a"]);
    await a.close();
    await b.close();
  } finally {
    mock.override = null;
  }
});

test("hidden tab: a beacon refused with 401 (expired token) is resent with a new token, once", async () => {
  const { mock, context, pageUrl } = h;
  const before = mock.events().length;
  const sessions = mock.sessions().length;
  const page = await context.newPage();
  await page.goto(pageUrl());
  await page.evaluate(() => {
    client.track({ userId: "u-1", eventType: "late_event", payload: { i: 1 } });
    client.track({ userId: "u-1", eventType: "late_event", payload: { i: 2 } });
  });
  await until(() => mock.sessions().length === sessions + 1, 5000, "the handshake");
  await sleep(100);
  mock.tokens.clear(); // the token the page holds is no longer valid
  await page.evaluate(() => {
    Object.defineProperty(document, "visibilityState", { value: "hidden", configurable: true });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  await until(() => mock.events().length === before + 2, 5000, "the events, with a new token");
  assert.equal(mock.sessions().length, sessions + 2, "one new handshake");
  await sleep(300);
  assert.deepEqual(mock.events().slice(before).map((e) => e.payload.i), [1, 2]);
  assert.deepEqual(await page.evaluate(() => errors), []);
  await page.close();
});
