// A real page in Debian's Chromium loads the bundle from cohort dev (/sdk/v1/cohort.min.js), uses
// the tenant's public key cross-origin (CORS, the session handshake) and, when the page is left,
// delivers its queue; the events land in the warehouse once each.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { apiUrl, publicKey, uniqueUser, waitStored } from './env.mjs';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

test('a page using the served bundle and a public key delivers its events when left', async () => {
  assert.ok(existsSync(CHROMIUM), `Chromium not found at ${CHROMIUM}: install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH`);
  const user = uniqueUser('browser');
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>shop</title>
<script src="${apiUrl}/sdk/v1/cohort.min.js"></script></head><body><h1>Shop</h1><script>
  window.errors = [];
  const client = new Cohort.Client({ apiUrl: ${JSON.stringify(apiUrl)}, apiKey: ${JSON.stringify(publicKey)},
    getUser: () => ({ userId: ${JSON.stringify(user)} }), flushInterval: 60000, onError: (e) => errors.push(String(e)) });
  client.trackPageView({ userId: ${JSON.stringify(user)} });
  for (let i = 0; i < 7; i++) client.track({ userId: ${JSON.stringify(user)}, eventType: 'product_clicked', payload: { i } });
</script></body></html>`;
  const site = http.createServer((req, res) => {
    if (req.url.startsWith('/landing')) {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(html);
    } else if (req.url === '/favicon.ico') {
      res.writeHead(204);
      res.end();
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  const profile = mkdtempSync(join(tmpdir(), 'cohort-e2e-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const consoleErrors = [];
  try {
    const page = await context.newPage();
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    // A visitor arriving from ChatGPT (the host of a different origin, as the browser would send it).
    await page.goto(`http://localhost:${site.address().port}/landing?utm_source=chatgpt.com`, { referer: 'https://chatgpt.com/' });
    await page.waitForFunction(() => typeof Cohort === 'object');
    // Leaving the page (pagehide, visibilitychange) must deliver the queue.
    await page.goto('about:blank');
    const rows = await waitStored(user, 9);
    const types = rows.map((r) => r.event_type).sort();
    assert.deepEqual(types, ['ai_referral_session', 'page_viewed', ...Array(7).fill('product_clicked')].sort());
    const referral = rows.find((r) => r.event_type === 'ai_referral_session').payload;
    assert.equal(referral.source_provider, 'chatgpt');
    assert.match(referral.landing_url, /\/landing\?utm_source=chatgpt\.com$/);
    assert.deepEqual(consoleErrors, []);
  } finally {
    await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
    await new Promise((r) => site.close(r));
  }
});
