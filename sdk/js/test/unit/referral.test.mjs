import { test } from "node:test";
import assert from "node:assert/strict";
import { aiReferral, uuidv7 } from "../../dist/index.mjs";

const LAND = "https://shop.example.com/p/shoes";

test("aiReferral: the five providers by referrer host, subdomains included", () => {
  const cases = [
    ["https://chatgpt.com/", "chatgpt"],
    ["https://chat.openai.com/c/123", "chatgpt"],
    ["https://www.perplexity.ai/search?q=best+running+shoes", "perplexity"],
    ["https://claude.ai/chat/abc", "claude"],
    ["https://gemini.google.com/app", "gemini"],
    ["https://copilot.microsoft.com/", "copilot"],
  ];
  for (const [ref, provider] of cases) {
    const r = aiReferral(LAND, ref);
    assert.ok(r, ref);
    assert.equal(r.source_provider, provider, ref);
    assert.equal(r.referrer_url, ref);
    assert.equal(r.landing_url, LAND);
  }
  assert.equal(aiReferral(LAND, "https://www.perplexity.ai/search?q=best+running+shoes").query_hint, "best running shoes");
  assert.equal(aiReferral(LAND, "https://chatgpt.com/").query_hint, null);
});

test("aiReferral: utm_source names the provider when the referrer is stripped", () => {
  const r = aiReferral(LAND + "?utm_source=chatgpt.com&q=red+shoes", "");
  assert.deepEqual(r, { source_provider: "chatgpt", query_hint: "red shoes", landing_url: LAND + "?utm_source=chatgpt.com&q=red+shoes", referrer_url: "" });
  assert.equal(aiReferral(LAND + "?utm_source=perplexity", "").source_provider, "perplexity");
  assert.equal(aiReferral(LAND + "?utm_source=claude.ai", "").source_provider, "claude");
  assert.equal(aiReferral(LAND + "?utm_source=gemini.google.com&utm_term=trail", "").query_hint, "trail");
  assert.equal(aiReferral(LAND + "?utm_source=copilot", "").source_provider, "copilot");
});

test("aiReferral: other sites and look-alike hosts are not AI referrals", () => {
  for (const ref of ["https://www.google.com/search?q=x", "https://notchatgpt.com/", "https://chatgpt.com.evil.example/", "https://claude.ai.example.com/", "not a url", ""]) {
    assert.equal(aiReferral(LAND, ref), null, ref);
  }
  assert.equal(aiReferral(LAND + "?utm_source=newsletter", ""), null);
});

test("uuidv7: version and variant bits, strictly increasing within one millisecond", () => {
  const ids = Array.from({ length: 5000 }, () => uuidv7());
  for (let i = 0; i < ids.length; i++) {
    assert.match(ids[i], /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    if (i) assert.ok(ids[i] > ids[i - 1]);
  }
  assert.equal(new Set(ids).size, ids.length);
});
