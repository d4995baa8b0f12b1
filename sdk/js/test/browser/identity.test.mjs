// The visitor's identity in a real browser: the anonymous id (UUIDv7, persisted in localStorage and
// a first-party cookie on the registrable domain), identify, reset. Pages are served on
// localhost and on subdomains of cohort.test, which Chromium resolves to 127.0.0.1.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { ARGS, CHROMIUM, needChromium, serve } from "./harness.mjs";

const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ANON = "cohort_anonymous_id";
const USER = "cohort_user_id";

let mock;
let browser;
before(async () => {
  needChromium();
  mock = await serve();
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...ARGS, "--host-resolver-rules=MAP *.cohort.test 127.0.0.1"] });
});
after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (mock) await mock.close();
});

const url = (host, q = "?user=") => `http://${host}:${mock.port}/page${q}`;

/** open loads the test page (no getUser unless q names a user) in ctx. */
async function open(ctx, host = "localhost", q) {
  const page = await ctx.newPage();
  await page.goto(url(host, q));
  return page;
}

/** sent runs fn in the page, flushes, and returns the events the mock received meanwhile. */
async function sent(page, fn = () => {}) {
  const n = mock.events().length;
  await page.evaluate(fn);
  await page.evaluate(() => client.flush());
  return mock.events().slice(n);
}

const anonOf = (page) => page.evaluate(() => client.anonymousId());
const cookie = async (ctx, name) => (await ctx.cookies()).find((c) => c.name === name);

test("the anonymous id is a UUIDv7 made on first use, persisted across reloads, on every event and in the handshake", async () => {
  const ctx = await browser.newContext();
  try {
    const t0 = Date.now();
    const page = await open(ctx, "localhost", "?user=&pv=1");
    const [pv] = await sent(page);
    assert.equal(pv.event_type, "page_viewed");
    assert.match(pv.anonymous_id, UUID7);
    assert.ok(!("user_id" in pv), `no user id without one: ${JSON.stringify(pv)}`);
    const ms = parseInt(pv.anonymous_id.replace(/-/g, "").slice(0, 12), 16);
    assert.ok(ms >= t0 - 1000 && ms <= Date.now() + 1000, "made now");
    assert.equal(await anonOf(page), pv.anonymous_id);
    assert.equal(await page.evaluate((k) => localStorage.getItem(k), ANON), pv.anonymous_id);
    const c = await cookie(ctx, ANON);
    assert.equal(c.value, pv.anonymous_id);
    assert.equal(c.sameSite, "Lax");
    assert.ok(c.expires > Date.now() / 1000 + 300 * 86400, `a long max-age: expires ${c.expires}`);
    const hs = mock.sessions().at(-1).json;
    assert.equal(hs.anonymous_id, pv.anonymous_id, "the pk_ handshake carries it");

    await page.reload();
    const [again] = await sent(page);
    assert.equal(again.anonymous_id, pv.anonymous_id, "same id after a reload");
    const other = await open(ctx);
    const [tracked] = await sent(other, () => client.track({ eventType: "item_viewed" }));
    assert.equal(tracked.anonymous_id, pv.anonymous_id, "same id in another tab");
    assert.ok(!("user_id" in tracked));
  } finally {
    await ctx.close();
  }
});

test("two browser contexts (two visitors) get two distinct ids", async () => {
  const a = await browser.newContext();
  const b = await browser.newContext();
  try {
    const [ea] = await sent(await open(a, "localhost", "?user=&pv=1"));
    const [eb] = await sent(await open(b, "localhost", "?user=&pv=1"));
    assert.match(ea.anonymous_id, UUID7);
    assert.match(eb.anonymous_id, UUID7);
    assert.notEqual(ea.anonymous_id, eb.anonymous_id);
  } finally {
    await a.close();
    await b.close();
  }
});

test("cookie fallback: with localStorage throwing, two subdomains share the id through a cookie on the registrable domain", async () => {
  const ctx = await browser.newContext();
  await ctx.addInitScript(() => {
    Object.defineProperty(window, "localStorage", {
      configurable: true,
      get() {
        throw new DOMException("access denied", "SecurityError");
      },
    });
  });
  try {
    const a = await open(ctx, "a.cohort.test");
    assert.equal(await a.evaluate(() => { try { localStorage; return "readable"; } catch (e) { return e.name; } }), "SecurityError");
    const [ea] = await sent(a, () => client.track({ eventType: "item_viewed" }));
    assert.match(ea.anonymous_id, UUID7);
    const c = await cookie(ctx, ANON);
    assert.equal(c.value, ea.anonymous_id);
    assert.equal(c.domain, ".cohort.test", "the widest domain the browser accepts");
    assert.equal(c.sameSite, "Lax");
    assert.equal(c.secure, false, "Secure only on https");
    assert.deepEqual((await ctx.cookies()).map((x) => x.name).sort(), [ANON], "the domain probe leaves no cookie");

    const b = await open(ctx, "b.cohort.test");
    const [eb] = await sent(b, () => client.track({ eventType: "item_viewed" }));
    assert.equal(eb.anonymous_id, ea.anonymous_id, "b.cohort.test reads a.cohort.test's id");
    assert.deepEqual(await a.evaluate(() => errors), []);
    assert.deepEqual(await b.evaluate(() => errors), []);
  } finally {
    await ctx.close();
  }

  // With localStorage working, the cookie still carries the id to the other subdomain, which then
  // keeps it in its own localStorage too.
  const ok = await browser.newContext();
  try {
    const a = await open(ok, "a.cohort.test");
    const id = await anonOf(a);
    const b = await open(ok, "www.b.cohort.test");
    assert.equal(await anonOf(b), id);
    assert.equal(await b.evaluate((k) => localStorage.getItem(k), ANON), id);
  } finally {
    await ok.close();
  }
});

test("identify sends both ids and remembers the user; identifying another user starts a new anonymous id", async () => {
  const ctx = await browser.newContext();
  try {
    const page = await open(ctx);
    const anon = await anonOf(page);
    const ev = await sent(page, () => {
      client.identify({ userId: "alice", traits: { plan: "pro" } });
      client.track({ eventType: "order_completed", payload: { total: 10 } });
    });
    assert.deepEqual(ev.map((e) => [e.event_type, e.user_id, e.anonymous_id]), [
      ["context_identified", "alice", anon],
      ["order_completed", "alice", anon],
    ]);
    assert.deepEqual(ev[0].payload, { plan: "pro" });

    await page.reload();
    const [later] = await sent(page, () => client.track({ eventType: "item_viewed" }));
    assert.deepEqual([later.user_id, later.anonymous_id], ["alice", anon], "remembered across reloads");
    const [same] = await sent(page, () => client.identify({ userId: "alice" }));
    assert.equal(same.anonymous_id, anon, "identifying the same user again keeps the id");

    const [bob] = await sent(page, () => client.identify({ userId: "bob" }));
    assert.equal(bob.user_id, "bob");
    assert.match(bob.anonymous_id, UUID7);
    assert.notEqual(bob.anonymous_id, anon, "one anonymous id never names two users");
  } finally {
    await ctx.close();
  }
});

test("reset forgets the user and starts a new anonymous id, in every tab", async () => {
  const ctx = await browser.newContext();
  try {
    const page = await open(ctx);
    const tab = await open(ctx);
    await sent(page, () => client.identify({ userId: "carol" }));
    const old = await anonOf(page);
    assert.equal(await anonOf(tab), old);
    const [ev] = await sent(page, () => {
      client.reset();
      client.track({ eventType: "logged_out_view" });
    });
    assert.match(ev.anonymous_id, UUID7);
    assert.notEqual(ev.anonymous_id, old);
    assert.ok(!("user_id" in ev), "no user after reset");
    assert.equal(await page.evaluate((k) => localStorage.getItem(k), USER), null);
    assert.equal(await cookie(ctx, USER), undefined);
    assert.equal((await cookie(ctx, ANON)).value, ev.anonymous_id);

    // The other tab sees the reset (storage event) ...
    const [other] = await sent(tab, () => client.track({ eventType: "item_viewed" }));
    assert.deepEqual([other.user_id, other.anonymous_id], [undefined, ev.anonymous_id]);
    // ... and so does the next load.
    await page.reload();
    assert.equal(await anonOf(page), ev.anonymous_id);
  } finally {
    await ctx.close();
  }
});

test("no event is ever sent with the user id \"anonymous\"", async () => {
  const ctx = await browser.newContext();
  try {
    const page = await ctx.newPage();
    await page.goto(url("localhost", "?user=&pv=1&utm_source=chatgpt.com"), { referer: "https://chatgpt.com/" });
    const ev = await sent(page);
    assert.deepEqual(ev.map((e) => e.event_type), ["page_viewed", "ai_referral_session"]);
    for (const e of ev) assert.match(e.anonymous_id, UUID7);
  } finally {
    await ctx.close();
  }
  const all = mock.events();
  assert.ok(all.length > 10, `${all.length} events in this file`);
  assert.deepEqual(all.filter((e) => e.user_id === "anonymous"), []);
  for (const e of all) assert.ok(e.user_id || e.anonymous_id, `an event names its subject: ${JSON.stringify(e)}`);
});
