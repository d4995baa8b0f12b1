// Shared set-up of the end-to-end tests: the running cohort dev (started by the Go test
// cmd/cohort TestClientLibraryAgainstDev, which passes its address and keys in the environment)
// and the warehouse inspector it serves.
import assert from 'node:assert/strict';
import net from 'node:net';

function need(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: these tests run against a real cohort dev; run them with ` +
      '`go test -run TestClientLibraryAgainstDev ./cmd/cohort`, which starts one');
  }
  return v;
}

export const apiUrl = need('COHORT_E2E_API_URL');
export const secretKey = need('COHORT_E2E_SECRET_KEY');
export const publicKey = need('COHORT_E2E_PUBLIC_KEY');
/** A Bearer token of the tenant (segments take one). */
export const token = need('COHORT_E2E_TOKEN');
const inspectUrl = need('COHORT_E2E_INSPECT_URL');

/** A user id no other test (or run) uses. */
export function uniqueUser(prefix) {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** The warehouse rows of a user, in occurrence order. */
export async function stored(userId) {
  const res = await fetch(`${inspectUrl}/events?user_id=${encodeURIComponent(userId)}`);
  assert.equal(res.status, 200, await res.clone().text());
  return res.json();
}

/**
 * Waits until the warehouse holds n events of userId, then a little longer to see that no more
 * arrive (a duplicate would), and returns them.
 */
export async function waitStored(userId, n, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  let rows = [];
  while (Date.now() < deadline) {
    rows = await stored(userId);
    if (rows.length >= n) break;
    await sleep(100);
  }
  await sleep(1500);
  rows = await stored(userId);
  assert.equal(rows.length, n, `expected ${n} stored events of ${userId}, found ${rows.length}`);
  assert.equal(new Set(rows.map((r) => r.event_id)).size, n, 'an event id was stored twice');
  return rows;
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * A TCP proxy in front of the API that, for the first `kills` answers of 202 to a batch request,
 * lets the request reach the server (which stores the events) and then cuts the client's
 * connection before the answer reaches it, so the client sees a network failure after the server
 * accepted. Returns {url, stats, close}.
 */
export async function cuttingProxy(kills) {
  const target = new URL(apiUrl);
  const stats = { batchRequests: 0, cut: 0 };
  let left = kills;
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client); sockets.add(upstream);
    let lastWasBatch = false;
    client.on('data', (chunk) => {
      const head = chunk.toString('latin1', 0, 200);
      if (/^POST \/api\/ingestion\/track\/batch\//.test(head)) {
        stats.batchRequests++;
        lastWasBatch = true;
      } else if (/^[A-Z]+ \//.test(head)) {
        lastWasBatch = false;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (lastWasBatch && left > 0 && chunk.toString('latin1', 0, 12) === 'HTTP/1.1 202') {
        left--;
        stats.cut++;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    const end = () => { client.destroy(); upstream.destroy(); };
    client.on('error', end); upstream.on('error', end);
    client.on('close', end); upstream.on('close', end);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    stats,
    close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(r); }),
  };
}
