// Builds dist/ from src/: index.mjs (ESM), index.cjs (CommonJS), *.d.ts (tsc) and cohort.min.js
// (minified browser IIFE, window.Cohort = {Client}). Deterministic: the same sources give
// byte-identical files (no timestamps, no absolute paths), because dist/ is committed and embedded
// into the Go binary. Usage: node scripts/build.mjs [outdir]  (default dist)
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, rmSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const out = resolve(root, process.argv[2] || "dist");
const version = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const common = {
  absWorkingDir: root,
  bundle: true,
  target: "es2020",
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
};
await build({ ...common, entryPoints: ["src/index.ts"], format: "esm", platform: "neutral", outfile: join(out, "index.mjs") });
await build({ ...common, entryPoints: ["src/index.ts"], format: "cjs", platform: "node", outfile: join(out, "index.cjs") });
await build({
  ...common,
  entryPoints: ["src/browser.ts"],
  format: "iife",
  platform: "browser",
  minify: true,
  // Private members (named _x in src/) get short names in the browser bundle; the other builds keep
  // them. Public names, options and every key sent to the API have no leading underscore.
  mangleProps: /^_/,
  banner: { js: `/* @cohort-dev/sdk ${version} | MIT */` },
  outfile: join(out, "cohort.min.js"),
});

execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", join(root, "tsconfig.json"), "--outDir", out], {
  stdio: "inherit",
});
// The browser entry has no API of its own.
rmSync(join(out, "browser.d.ts"), { force: true });
console.log(readdirSync(out).sort().join(" "));
