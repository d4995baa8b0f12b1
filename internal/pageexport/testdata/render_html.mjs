// Opens an exported HTML page in Debian's Chromium (playwright-core from sdk/js) and prints a JSON
// report: console errors, page errors, failed requests, each block's box, whether hostile text ran,
// and whether the tracking request was made. Usage: node render_html.mjs <url> <screenshot.png>
import { createRequire } from "node:module";
import path from "node:path";

const [url, shot] = process.argv.slice(2);
const require = createRequire(path.join(process.env.COHORT_SDK_DIR, "package.json"));
const { chromium } = require("playwright-core");

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const report = { consoleErrors: [], pageErrors: [], failedRequests: [], blocks: [] };
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error") report.consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => report.pageErrors.push(String(e)));
  page.on("requestfailed", (r) => report.failedRequests.push(r.url() + " " + (r.failure()?.errorText ?? "") + " " + r.method() + " " + r.resourceType()));
  const tracked = page.waitForEvent("requestfinished", { predicate: (r) => r.url().includes("/api/test-track"), timeout: 10000 }).then(() => true, () => false);
  await page.goto(url, { waitUntil: "load" });
  report.tracked = await tracked;
  report.blocks = await page.$$eval("[data-block-type]", (els) => els.map((el) => {
    const r = el.getBoundingClientRect();
    const s = getComputedStyle(el);
    return { type: el.getAttribute("data-block-type"), width: r.width, height: r.height,
      visible: r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none" };
  }));
  report.pwned = await page.evaluate(() => window.__pwned ?? null);
  report.primary = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue("--cohort-primary").trim());
  await page.screenshot({ path: shot, fullPage: true });
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
