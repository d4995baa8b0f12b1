// Identity end to end against cohort dev and a real Chromium: two anonymous visitors, one on the
// hosted page (/p/<tenant>/<slug>) and one on an HTML export served from another origin, each
// get their own anonymous id from the page's tracking snippet; then each signs up (identify with a
// user id, from the same origin's library) and orders (server side, sk_ key). A segment "viewed a
// page and ordered", computed after the links, holds both users: their page views were made
// before they were known. The membership lookup by the anonymous id and by the user id answer the
// same segments.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { apiUrl, secretKey, publicKey, token, stored, sleep, uniqueUser } from './env.mjs';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function api(method, path, body, auth = `ApiKey ${secretKey}`) {
  const res = await fetch(apiUrl + path, {
    method,
    headers: { Authorization: auth, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = text; }
  return { status: res.status, body: parsed };
}

async function until(what, fn, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await sleep(200);
  }
  assert.fail(`timed out waiting for ${what}`);
}

// visit opens url in a fresh browser profile (a distinct visitor), waits for its page view to be
// sent, then signs the visitor up as userId with the client library the page loaded (same origin,
// so the same persisted anonymous id) and returns the visitor's anonymous id.
async function visitAndSignUp(url, userId, problems) {
  const profile = mkdtempSync(join(tmpdir(), 'cohort-e2e-identity-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS });
  try {
    const tab = await context.newPage();
    tab.on('console', (m) => { if (m.type() === 'error') problems.push(`${url}: ${m.text()} (${m.location().url})`); });
    tab.on('pageerror', (e) => problems.push(`${url}: ${e}`));
    await tab.goto(url);
    await tab.waitForFunction(() => typeof Cohort === 'object');
    const anon = await tab.evaluate(async ({ apiUrl, publicKey, userId }) => {
      const c = new window.Cohort.Client({ apiUrl, apiKey: publicKey, batch: false });
      const id = c.anonymousId();
      c.identify({ userId, traits: { email: `${userId}@example.com` } });
      await c.flush();
      return id;
    }, { apiUrl, publicKey, userId });
    await tab.goto('about:blank'); // leaving the page sends what is queued
    return anon;
  } finally {
    await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
}

test('anonymous visitors of a hosted and an exported page keep their views once they sign up', async () => {
  assert.ok(existsSync(CHROMIUM), `Chromium not found at ${CHROMIUM}`);
  const who = await api('GET', '/api/auth/whoami/');
  assert.equal(who.status, 200, JSON.stringify(who.body));
  const tenantSlug = who.body.tenant_slug;
  const tag = `${process.pid}-${Date.now().toString(36)}`;

  const tpl = await api('POST', '/api/ai-pages/templates/', {
    name: `Identity ${tag}`,
    blocks: [
      { type: 'hero', props: { headline: 'Spring boots', subheadline: 'For wet days', cta_label: 'Shop', cta_url: 'https://shop.example/boots' } },
      { type: 'text_section', props: { heading: 'Why us', body: 'Made to last.' } },
    ],
  });
  assert.equal(tpl.status, 201, JSON.stringify(tpl.body));
  const page = await api('POST', '/api/ai-pages/pages/', { slug: `spring-${tag}`, title: 'Spring', template_id: tpl.body.id });
  assert.equal(page.status, 201, JSON.stringify(page.body));
  const pub = await api('PATCH', `/api/ai-pages/pages/${page.body.id}/`, { published: true });
  assert.equal(pub.status, 200, JSON.stringify(pub.body));

  const started = await api('POST', `/api/ai-pages/pages/${page.body.id}/export/`, { format: 'html' });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const exp = await until('the export', async () => {
    const e = await api('GET', `/api/ai-pages/pages/${page.body.id}/export/?export_id=${started.body.export_id}`);
    return e.body.status === 'ready' || e.body.status === 'error' ? e : null;
  });
  assert.equal(exp.body.status, 'ready', JSON.stringify(exp.body));
  const html = await (await fetch(exp.body.download_url)).text();
  const site = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(html);
  });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));

  const hostedUser = uniqueUser('hosted');
  const exportedUser = uniqueUser('exported');
  const problems = [];
  let hostedAnon, exportedAnon;
  try {
    hostedAnon = await visitAndSignUp(`${apiUrl}/p/${tenantSlug}/spring-${tag}`, hostedUser, problems);
    exportedAnon = await visitAndSignUp(`http://localhost:${site.address().port}/spring-${tag}`, exportedUser, problems);
  } finally {
    await new Promise((r) => site.close(r));
  }
  assert.deepEqual(problems, []);
  const v7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  assert.match(hostedAnon, v7);
  assert.match(exportedAnon, v7);
  assert.notEqual(hostedAnon, exportedAnon, 'two visitors, two anonymous ids');

  // The views were stored under the anonymous ids, never under a user called "anonymous".
  for (const anon of [hostedAnon, exportedAnon]) {
    await until(`the page view of ${anon}`, async () => (await stored(anon)).some((r) => r.event_type === 'page_viewed'));
  }
  assert.equal((await stored('anonymous')).filter((r) => JSON.stringify(r.payload).includes(`spring-${tag}`)).length, 0);

  // Both order, server side, after signing up.
  for (const user of [hostedUser, exportedUser]) {
    const r = await api('POST', '/api/ingestion/track/', { user_id: user, event_type: 'order_completed', payload: { amount: 80 } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
  }
  for (const user of [hostedUser, exportedUser]) {
    await until(`the identify and order of ${user}`, async () => {
      const types = (await stored(user)).map((r) => r.event_type);
      return types.includes('order_completed') && types.includes('context_identified');
    });
  }

  const bearer = `Bearer ${token}`;
  const seg = await api('POST', '/api/segments/', { name: `Viewed and ordered ${tag}`, segment_type: 'rule', tenant: who.body.tenant_id }, bearer);
  assert.equal(seg.status, 201, JSON.stringify(seg.body));
  const def = { logic: 'AND', conditions: [
    { type: 'frequency', event_type: 'page_viewed', operator: 'gte', value: 1, window_days: 30 },
    { type: 'frequency', event_type: 'order_completed', operator: 'gte', value: 1, window_days: 30 },
  ] };
  const patched = await api('PATCH', `/api/segments/${seg.body.id}/`, { definition: def }, bearer);
  assert.ok(patched.status === 200 || patched.status === 202, JSON.stringify(patched.body));
  await until('the segment compute', async () => {
    const s = await api('GET', `/api/segments/${seg.body.id}/`, undefined, bearer);
    assert.notEqual(s.body.status, 'error', JSON.stringify(s.body));
    return s.body.status === 'ready' ? s : null;
  }, 60000);
  const members = await api('GET', `/api/segments/${seg.body.id}/members/?limit=1000`, undefined, bearer);
  assert.equal(members.status, 200, JSON.stringify(members.body));
  const ids = (members.body.results ?? members.body.members ?? members.body.items ?? []).map((m) => m.user_id);
  assert.ok(ids.includes(hostedUser), `members ${JSON.stringify(ids)} include ${hostedUser}`);
  assert.ok(ids.includes(exportedUser), `members ${JSON.stringify(ids)} include ${exportedUser}`);
  assert.ok(!ids.includes(hostedAnon) && !ids.includes(exportedAnon), 'a linked anonymous id is not a member of its own');

  for (const [user, anon] of [[hostedUser, hostedAnon], [exportedUser, exportedAnon]]) {
    const byUser = await api('GET', `/api/segments/membership/?user_id=${encodeURIComponent(user)}`);
    const byAnon = await api('GET', `/api/segments/membership/?user_id=${encodeURIComponent(anon)}`);
    assert.equal(byUser.status, 200, JSON.stringify(byUser.body));
    assert.equal(byAnon.status, 200, JSON.stringify(byAnon.body));
    assert.ok(byUser.body.segment_ids.includes(seg.body.id));
    assert.deepEqual([...byAnon.body.segment_ids].sort(), [...byUser.body.segment_ids].sort());
  }
});
