// Size budget of the browser bundle: < 5 KB minified and gzipped.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

const LIMIT = 5 * 1024;

test("dist/cohort.min.js is under 5 KB gzipped", () => {
  const src = readFileSync(new URL("../dist/cohort.min.js", import.meta.url));
  const gz = gzipSync(src, { level: 9 }).length;
  console.log(`cohort.min.js: ${src.length} bytes minified, ${gz} bytes gzipped (level 9), budget ${LIMIT}`);
  assert.ok(gz < LIMIT, `${gz} bytes gzipped, budget ${LIMIT}`);
});
