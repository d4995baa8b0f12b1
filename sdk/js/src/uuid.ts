// UUIDv7 message ids (RFC 9562): 48-bit Unix milliseconds, then a 12-bit counter that keeps ids
// made in the same millisecond increasing (method 1 of section 6.2), then 62 random bits. Ids from
// one Client are therefore strictly increasing, even when the clock stands still or steps back.

const pool = new Uint8Array(256);
let used = pool.length;

const cryptoObj: { getRandomValues?(a: Uint8Array): Uint8Array } | undefined = (globalThis as any).crypto;

/** random fills b with random bytes: the Web Crypto API where there is one (browsers, Node >= 19,
 * Node 18 with --experimental-global-webcrypto), else Math.random. */
function refill(): void {
  if (cryptoObj && cryptoObj.getRandomValues) cryptoObj.getRandomValues(pool);
  else for (let i = 0; i < pool.length; i++) pool[i] = (Math.random() * 256) | 0;
  used = 0;
}

const hex: string[] = [];
for (let i = 0; i < 256; i++) hex.push((i + 256).toString(16).slice(1));

let lastMs = -1;
let seq = 0;

/** uuidv7 returns a new, monotonically increasing UUIDv7 string. */
export function uuidv7(): string {
  let ms = Date.now();
  if (used + 9 > pool.length) refill();
  if (ms > lastMs) {
    lastMs = ms;
    // Seed the counter in its lower half so that many ids fit in one millisecond.
    seq = pool[used++] << 3;
  } else if (++seq > 0xfff) {
    lastMs++;
    seq = 0;
  }
  ms = lastMs;
  const p = pool;
  const u = used;
  used += 8;
  const hi = Math.floor(ms / 0x1000000); // upper 24 of 48 bits
  const lo = ms % 0x1000000;
  return (
    hex[(hi >>> 16) & 255] + hex[(hi >>> 8) & 255] + hex[hi & 255] +
    hex[(lo >>> 16) & 255] + "-" + hex[(lo >>> 8) & 255] + hex[lo & 255] + "-" +
    hex[0x70 | (seq >>> 8)] + hex[seq & 255] + "-" +
    hex[0x80 | (p[u] & 0x3f)] + hex[p[u + 1]] + "-" +
    hex[p[u + 2]] + hex[p[u + 3]] + hex[p[u + 4]] + hex[p[u + 5]] + hex[p[u + 6]] + hex[p[u + 7]]
  );
}
