// Anonymous visitors in Chromium against cohort dev: a page on another origin loads the bundle the
// API serves; two visitors get two anonymous ids, their views are stored under them (never under a
// user called "anonymous"), and an identify carries the user id with the anonymous id. Needs a
// server that accepts events with an anonymous_id and no user_id.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { apiUrl, publicKey, uniqueUser, waitStored, stored } from './env.mjs';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('two anonymous visitors get two ids; a sign-up identifies one with both ids', async () => {
  assert.ok(existsSync(CHROMIUM), `Chromium not found at ${CHROMIUM}: apt-get install chromium, or set CHROMIUM_PATH`);
  const tag = uniqueUser('visit');
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>shop</title>
<script src="${apiUrl}/sdk/v1/cohort.min.js"></script></head><body><script>
  window.errors = [];
  window.client = new Cohort.Client({ apiUrl: ${JSON.stringify(apiUrl)}, apiKey: ${JSON.stringify(publicKey)},
    flushInterval: 60000, onError: (e) => errors.push(String(e)) });
  client.trackPageView({ path: '/landing/${tag}' });
</script></body></html>`;
  const site = http.createServer((req, res) => {
    res.writeHead(req.url.startsWith('/landing') ? 200 : 204, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(req.url.startsWith('/landing') ? html : '');
  });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const user = uniqueUser('signed-up');
  try {
    const anons = [];
    const pages = [];
    for (let i = 0; i < 2; i++) {
      const ctx = await browser.newContext();
      const page = await ctx.newPage();
      await page.goto(`http://localhost:${site.address().port}/landing`);
      await page.waitForFunction(() => window.client);
      anons.push(await page.evaluate(() => client.anonymousId()));
      await page.evaluate(() => client.flush());
      pages.push(page);
    }
    assert.match(anons[0], UUID7);
    assert.match(anons[1], UUID7);
    assert.notEqual(anons[0], anons[1]);

    // The first visitor signs up.
    await pages[0].evaluate((u) => { client.identify({ userId: u, traits: { plan: 'pro' } }); return client.flush(); }, user);
    for (const [i, page] of pages.entries()) assert.deepEqual(await page.evaluate(() => errors), [], `visitor ${i}`);

    for (const anon of anons) {
      const [view] = await waitStored(anon, 1);
      assert.equal(view.event_type, 'page_viewed');
      assert.equal(view.payload.path, `/landing/${tag}`);
    }
    const [identified] = await waitStored(user, 1);
    assert.equal(identified.event_type, 'context_identified');
    assert.deepEqual((await stored('anonymous')).filter((r) => r.payload && r.payload.path === `/landing/${tag}`), []);
  } finally {
    await browser.close().catch(() => {});
    await new Promise((r) => site.close(r));
  }
});
