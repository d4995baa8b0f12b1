// The client library against a real cohort dev: every event tracked arrives in the warehouse once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../../dist/index.mjs';
import { apiUrl, secretKey, publicKey, uniqueUser, waitStored, cuttingProxy } from './env.mjs';

test('secret key: 120 tracked events are stored once each, in at most 6 requests', async () => {
  const user = uniqueUser('sk');
  const errors = [];
  const requests = [];
  const when = '2026-11-20T10:00:00.000Z';
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    if (String(input).includes('/api/ingestion/track/batch/')) requests.push(init);
    return realFetch(input, init);
  };
  try {
    const client = new Client({ apiUrl, apiKey: secretKey, onError: (e) => errors.push(e) });
    for (let i = 0; i < 120; i++) {
      client.track({ userId: user, eventType: 'product_viewed', occurredAt: when, payload: { i, sku: `SKU-${i}` } });
    }
    await client.shutdown();
  } finally {
    globalThis.fetch = realFetch;
  }
  assert.deepEqual(errors, []);
  assert.ok(requests.length >= 1 && requests.length <= 6, `batchSize 20 sends 120 events in at most 6 requests, not ${requests.length}`);
  const rows = await waitStored(user, 120);
  assert.deepEqual(rows.map((r) => r.payload.i).sort((a, b) => a - b), [...Array(120).keys()]);
  for (const r of rows) {
    assert.equal(r.event_type, 'product_viewed');
    // The server corrects occurred_at for the client's clock (received_at - (sent_at - occurred_at)),
    // which moves it by the request's transit time.
    const drift = Math.abs(new Date(r.occurred_at) - new Date(when));
    assert.ok(drift < 5000, `occurred_at ${r.occurred_at} is not the tracked ${when}`);
  }
});

test('identify sends context_identified with the traits', async () => {
  const user = uniqueUser('identify');
  const client = new Client({ apiUrl, apiKey: secretKey });
  client.identify({ userId: user, traits: { email: `${user}@example.com`, plan: 'pro' } });
  await client.shutdown();
  const [row] = await waitStored(user, 1);
  assert.equal(row.event_type, 'context_identified');
  assert.deepEqual(row.payload, { email: `${user}@example.com`, plan: 'pro' });
});

test('public key: the session handshake, then events with the session token', async () => {
  const user = uniqueUser('pk');
  const errors = [];
  const client = new Client({
    apiUrl,
    apiKey: publicKey,
    getUser: () => ({ userId: user }),
    batchSize: 5,
    onError: (e) => errors.push(e),
  });
  for (let i = 0; i < 12; i++) client.track({ userId: user, eventType: 'button_clicked', payload: { i } });
  await client.shutdown();
  assert.deepEqual(errors, []);
  const rows = await waitStored(user, 12);
  assert.ok(rows.every((r) => r.event_type === 'button_clicked'));
});

test('a connection cut after the server accepted a batch loses nothing and duplicates nothing', async () => {
  const user = uniqueUser('cut');
  const proxy = await cuttingProxy(2);
  const errors = [];
  try {
    const client = new Client({ apiUrl: proxy.url, apiKey: secretKey, batchSize: 50, onError: (e) => errors.push(e) });
    for (let i = 0; i < 150; i++) client.track({ userId: user, eventType: 'scrolled', payload: { i } });
    await client.shutdown();
  } finally {
    await proxy.close();
  }
  assert.equal(proxy.stats.cut, 2, 'two accepted batches had their answer cut');
  assert.ok(proxy.stats.batchRequests > proxy.stats.cut, `the cut batches were sent again (${proxy.stats.batchRequests} requests)`);
  const rows = await waitStored(user, 150);
  assert.deepEqual(rows.map((r) => r.payload.i).sort((a, b) => a - b), [...Array(150).keys()]);
});

test('batch: false sends every event at once', async () => {
  const user = uniqueUser('nobatch');
  const client = new Client({ apiUrl, apiKey: secretKey, batch: false });
  client.track({ userId: user, eventType: 'signed_up' });
  await client.flush();
  await waitStored(user, 1);
  await client.shutdown();
});

test('anonymous ids from Node: an anonymous event is stored under its anonymous id; identify with both ids; no id is made up', async () => {
  // Needs a server that accepts events with an anonymous_id and no user_id.
  const user = uniqueUser('node-user');
  const anon = uniqueUser('node-anon');
  const errors = [];
  const sent = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    if (String(input).includes('/api/ingestion/track/batch/')) sent.push(...JSON.parse(init.body).events);
    return realFetch(input, init);
  };
  try {
    const client = new Client({ apiUrl, apiKey: secretKey, onError: (e) => errors.push(e) });
    client.track({ anonymousId: anon, eventType: 'product_viewed', payload: { sku: 'SKU-1' } });
    client.identify({ userId: user, anonymousId: anon, traits: { plan: 'pro' } });
    client.track({ userId: user, eventType: 'order_completed', payload: { total: 10 } });
    await client.shutdown();
  } finally {
    globalThis.fetch = realFetch;
  }
  assert.deepEqual(errors, []);
  assert.deepEqual(sent.map((e) => [e.event_type, e.user_id, e.anonymous_id]), [
    ['product_viewed', undefined, anon],
    ['context_identified', user, anon],
    ['order_completed', user, undefined],
  ]);
  const [viewed] = await waitStored(anon, 1);
  assert.equal(viewed.event_type, 'product_viewed');
  const rows = await waitStored(user, 2);
  assert.deepEqual(rows.map((r) => r.event_type).sort(), ['context_identified', 'order_completed']);
});
