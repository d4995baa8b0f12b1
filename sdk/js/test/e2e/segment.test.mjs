// Segment's own Node library, unchanged but for its host, sends to cohort dev's /v1/batch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Analytics } from '@segment/analytics-node';
import { apiUrl, secretKey, uniqueUser, waitStored } from './env.mjs';

test('@segment/analytics-node: track, identify and page land as documented', async () => {
  const user = uniqueUser('segment');
  const anon = uniqueUser('segment-anon');
  const analytics = new Analytics({ writeKey: secretKey, host: apiUrl, flushAt: 10, flushInterval: 200, maxRetries: 3 });
  const failures = [];
  analytics.on('error', (e) => failures.push(e));
  analytics.track({ userId: user, event: 'Order Completed', properties: { order_id: 'o-1', revenue: 42.5 } });
  analytics.identify({ userId: user, traits: { email: `${user}@example.com`, name: 'Ada' } });
  analytics.page({ userId: user, name: 'Pricing', category: 'Docs', properties: { path: '/pricing', title: 'Pricing' } });
  analytics.track({ anonymousId: anon, event: 'Product Viewed', properties: { sku: 'SKU-1' } });
  await analytics.closeAndFlush({ timeout: 10000 });
  assert.deepEqual(failures, []);

  const rows = await waitStored(user, 3);
  const byType = Object.fromEntries(rows.map((r) => [r.event_type, r.payload]));
  assert.deepEqual(Object.keys(byType).sort(), ['context_identified', 'order_completed', 'page_viewed']);
  assert.deepEqual(byType.order_completed, { order_id: 'o-1', revenue: 42.5 });
  assert.deepEqual(byType.context_identified, { email: `${user}@example.com`, name: 'Ada' });
  assert.equal(byType.page_viewed.name, 'Pricing');
  assert.equal(byType.page_viewed.category, 'Docs');
  assert.equal(byType.page_viewed.path, '/pricing');

  const [anonRow] = await waitStored(anon, 1);
  assert.equal(anonRow.event_type, 'product_viewed');
  assert.deepEqual(anonRow.payload, { sku: 'SKU-1' });
});
