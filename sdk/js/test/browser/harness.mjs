// Browser test harness: Debian's Chromium driven by playwright-core, a node:http server on
// 127.0.0.1 that serves the test page and dist/cohort.min.js and is the mock API (it records
// every request). The page is loaded from http://localhost:<port> and calls the API at
// http://127.0.0.1:<port>: a cross-origin setup, as on a customer's site.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { startMock } from "../mock.mjs";

const BUNDLE = readFileSync(new URL("../../dist/cohort.min.js", import.meta.url), "utf8");

export const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

export const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

function page(api) {
  return `<!doctype html><html><head><meta charset="utf-8"><title>Cohort test page</title></head><body>
<script src="/cohort.min.js"></script>
<script>
  const p = new URLSearchParams(location.search);
  window.errors = [];
  window.client = new Cohort.Client({
    apiUrl: ${JSON.stringify(api)},
    apiKey: p.get("key") || "pk_test",
    getUser: p.get("user") == "" ? undefined : () => ({ userId: p.get("user") || "u-1" }),
    batchSize: +p.get("bs") || 20,
    flushInterval: 60000,
    retryDelay: 300,
    onError: (e) => errors.push(e.message),
  });
  if (p.get("pv")) client.trackPageView();
</script></body></html>`;
}

/** needChromium fails (not skips) when Chromium is missing. */
export function needChromium() {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: install it with \`apt-get install chromium\` (Debian) or set CHROMIUM_PATH`);
  }
}

/** serve starts the server: the test page at /page (?key=, ?bs=, ?pv=1 tracks a page view,
 * ?user= is getUser's user id, "" for no getUser), the bundle, and the mock API. */
export async function serve() {
  let api = "";
  const mock = await startMock(
    (r, m) => {
      if (m.override) {
        const o = m.override(r);
        if (o) return o;
      }
      if (r.method !== "GET") return undefined;
      if (r.path.startsWith("/page")) return { status: 200, headers: { "Content-Type": "text/html; charset=utf-8" }, body: page(api) };
      if (r.path === "/cohort.min.js") return { status: 200, headers: { "Content-Type": "text/javascript" }, body: BUNDLE };
      if (r.path === "/favicon.ico") return { status: 404, body: "" };
      return undefined;
    },
    { cors: true },
  );
  api = mock.url;
  return mock;
}

/** start launches Chromium (a fresh profile) and the server. */
export async function start() {
  needChromium();
  const mock = await serve();
  const profile = mkdtempSync(join(tmpdir(), "cohort-chromium-"));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS });
  const pageUrl = (q = "") => `http://localhost:${mock.port}/page${q}`;
  return {
    mock,
    context,
    pageUrl,
    async close() {
      await context.close().catch(() => {});
      await mock.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
