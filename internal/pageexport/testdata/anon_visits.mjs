// Visits an exported HTML page in Debian's Chromium as two visitors: the first twice (two loads in
// one browser context), the second once (another context). Each visit leaves the page once its
// session handshake is done, so that the page-hide flush sends the page view, and waits until the
// test server has received it (GET <origin>/events-count grows) before it closes the context, which
// would cancel a beacon still on its way. Prints a JSON report of console and page errors.
// Usage: node anon_visits.mjs <url>
import { createRequire } from "node:module";
import path from "node:path";

const [url] = process.argv.slice(2);
const require = createRequire(path.join(process.env.COHORT_SDK_DIR, "package.json"));
const { chromium } = require("playwright-core");

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const report = { consoleErrors: [], pageErrors: [], visits: 0 };
const countURL = new URL("/events-count", url).href;
const received = async () => Number(await (await fetch(countURL)).text());
try {
  for (const loads of [2, 1]) {
    const ctx = await browser.newContext();
    for (let i = 0; i < loads; i++) {
      const page = await ctx.newPage();
      page.on("console", (m) => { if (m.type() === "error") report.consoleErrors.push(m.text()); });
      page.on("pageerror", (e) => report.pageErrors.push(String(e)));
      const session = page.waitForEvent("requestfinished", { predicate: (r) => r.url().includes("/api/auth/session/"), timeout: 10000 });
      await page.goto(url, { waitUntil: "load" });
      await session;
      const before = await received();
      await page.goto("about:blank");
      for (const end = Date.now() + 10000; Date.now() < end && (await received()) <= before;) {
        await new Promise((r) => setTimeout(r, 50));
      }
      await page.close();
      report.visits++;
    }
    await ctx.close();
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
