// dist/ is committed (the Go binary embeds dist/cohort.min.js): it must be exactly what a fresh
// build of src/ gives, and the build must be deterministic.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function buildInto(dir) {
  execFileSync(process.execPath, [join(root, "scripts/build.mjs"), dir], { cwd: root, stdio: "pipe" });
  return Object.fromEntries(readdirSync(dir).sort().map((f) => [f, readFileSync(join(dir, f))]));
}

test("committed dist/ equals a fresh build, and two builds are byte-identical", (t) => {
  const tmp = mkdtempSync(join(tmpdir(), "cohort-sdk-dist-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const a = buildInto(join(tmp, "a"));
  const b = buildInto(join(tmp, "b"));
  assert.deepEqual(Object.keys(a), Object.keys(b));
  for (const f of Object.keys(a)) assert.ok(a[f].equals(b[f]), `${f} differs between two builds`);

  const committed = join(root, "dist");
  const files = readdirSync(committed).sort();
  assert.deepEqual(files, Object.keys(a), "dist/ holds other files than a build makes: run npm run build");
  for (const f of files) {
    assert.ok(readFileSync(join(committed, f)).equals(a[f]), `dist/${f} is stale: run npm run build and commit dist/`);
  }
  for (const want of ["index.mjs", "index.cjs", "index.d.ts", "cohort.min.js"]) assert.ok(files.includes(want), want);
});

test("package exports: import, require and the browser global", async () => {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  assert.equal(pkg.name, "@cohort-dev/sdk");
  assert.deepEqual(pkg.dependencies, undefined, "zero runtime dependencies");
  const esm = await import(join(root, pkg.exports["."].import));
  const cjs = createRequire(import.meta.url)(join(root, pkg.exports["."].require));
  assert.equal(typeof esm.Client, "function");
  assert.equal(typeof cjs.Client, "function");
  assert.match(readFileSync(join(root, pkg.exports["."].types), "utf8"), /Client/);
  const g = {};
  new Function("globalThis", readFileSync(join(root, "dist/cohort.min.js"), "utf8"))(g);
  assert.equal(typeof g.Cohort.Client, "function");
});
