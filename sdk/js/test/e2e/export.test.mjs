// The publishing path end to end against cohort dev: a template, a page made from it, an html
// export built by the workflow and downloaded through its signed link, then opened in Chromium
// from another origin: it renders, loads the bundle the API serves, and its page view (with the
// AI referral) is stored in the warehouse under the visitor's anonymous id. Needs a server that
// accepts events with an anonymous_id and no user_id.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { apiUrl, secretKey, stored, sleep } from './env.mjs';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

async function api(method, path, body) {
  const res = await fetch(apiUrl + path, {
    method,
    headers: { Authorization: `ApiKey ${secretKey}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

test('an html export renders in Chromium and records its page view', async () => {
  assert.ok(existsSync(CHROMIUM), `Chromium not found at ${CHROMIUM}: apt-get install chromium, or set CHROMIUM_PATH`);
  const tag = `${process.pid}-${Date.now().toString(36)}`;
  const tpl = await api('POST', '/api/ai-pages/templates/', {
    name: `Winter ${tag}`,
    blocks: [
      { type: 'hero', props: { headline: 'Winter <sale> & more', subheadline: 'Warm coats', cta_label: 'Shop', cta_url: 'https://shop.example/coats' } },
      { type: 'text_section', props: { heading: 'Why us', body: 'Made to last.\nShipped fast.' } },
      { type: 'feature_list', props: { heading: 'Features', items: [{ title: 'Waterproof' }, { title: 'Recycled down' }] } },
      { type: 'cta_banner', props: { headline: 'Ready?', cta_label: 'Buy now', cta_url: 'https://shop.example/buy' } },
    ],
  });
  assert.equal(tpl.status, 201, JSON.stringify(tpl.body));
  const page = await api('POST', '/api/ai-pages/pages/', { slug: `winter-${tag}`, title: 'Winter', template_id: tpl.body.id });
  assert.equal(page.status, 201, JSON.stringify(page.body));

  const started = await api('POST', `/api/ai-pages/pages/${page.body.id}/export/`, { format: 'html' });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  assert.equal(started.body.status, 'pending');
  let exp;
  for (let i = 0; i < 150; i++) {
    exp = await api('GET', `/api/ai-pages/pages/${page.body.id}/export/?export_id=${started.body.export_id}`);
    if (exp.body.status === 'ready' || exp.body.status === 'error') break;
    await sleep(100);
  }
  assert.equal(exp.body.status, 'ready', JSON.stringify(exp.body));
  assert.ok(exp.body.download_url, 'a ready export has a download_url');
  const dl = await fetch(exp.body.download_url);
  assert.equal(dl.status, 200);
  const html = await dl.text();
  assert.match(html, /\/sdk\/v1\/cohort\.min\.js/);
  assert.ok(!html.includes('Winter <sale>'), 'prop text is escaped');

  const site = http.createServer((req, res) => {
    if (req.url.startsWith('/winter')) {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(html);
    } else {
      res.writeHead(204);
      res.end();
    }
  });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  const landing = `http://localhost:${site.address().port}/winter-${tag}?utm_source=perplexity.ai`;
  const profile = mkdtempSync(join(tmpdir(), 'cohort-e2e-export-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const problems = [];
  try {
    const tab = await context.newPage();
    tab.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
    tab.on('pageerror', (e) => problems.push(String(e)));
    await tab.goto(landing);
    for (const text of ['Winter <sale> & more', 'Why us', 'Waterproof', 'Buy now']) {
      assert.ok(await tab.getByText(text, { exact: false }).first().isVisible(), `"${text}" is visible`);
    }
    await tab.waitForFunction(() => typeof Cohort === 'object');
    // The snippet names no user: the library records the visit as the visitor's anonymous id.
    await tab.waitForFunction(() => localStorage.getItem('cohort_anonymous_id'));
    const anon = await tab.evaluate(() => localStorage.getItem('cohort_anonymous_id'));
    assert.match(anon, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    await tab.goto('about:blank'); // leaving the page sends what is queued

    // Stored with the anonymous id as its subject, never as a user called "anonymous".
    let mine = [];
    for (let i = 0; i < 100 && mine.length < 2; i++) {
      mine = (await stored(anon)).filter((r) => JSON.stringify(r.payload).includes(`winter-${tag}`));
      await sleep(200);
    }
    assert.deepEqual(mine.map((r) => r.event_type).sort(), ['ai_referral_session', 'page_viewed']);
    assert.deepEqual((await stored('anonymous')).filter((r) => JSON.stringify(r.payload).includes(`winter-${tag}`)), []);
    assert.equal(mine.find((r) => r.event_type === 'ai_referral_session').payload.source_provider, 'perplexity');
    assert.deepEqual(problems, []);
  } finally {
    await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
    await new Promise((r) => site.close(r));
  }
});
