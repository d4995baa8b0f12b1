// Ids of events in Node: user_id and anonymous_id come from the call, else from getUser; an
// anonymous id is never made up.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "../../dist/index.mjs";
import { startMock } from "../mock.mjs";

/** ids sends calls through a client with opts and returns [event_type, user_id, anonymous_id] of
 * each event delivered (undefined: the field is absent), and the errors reported. */
async function ids(t, opts, calls) {
  const mock = await startMock();
  t.after(() => mock.close());
  const errors = [];
  const c = new Client({ apiUrl: mock.url, apiKey: "sk_test", flushInterval: 60000, onError: (e) => errors.push(e.message), ...opts });
  calls(c);
  await c.shutdown();
  return { events: mock.events().map((e) => [e.event_type, e.user_id, e.anonymous_id]), raw: mock.events(), errors };
}

const cases = [
  {
    name: "without anonymousId only user_id is sent",
    calls: (c) => c.track({ userId: "u-1", eventType: "item_viewed" }),
    want: [["item_viewed", "u-1", undefined]],
  },
  {
    name: "anonymousId in the call: an anonymous event",
    calls: (c) => c.track({ anonymousId: "a-1", eventType: "item_viewed" }),
    want: [["item_viewed", undefined, "a-1"]],
  },
  {
    name: "both ids in the call",
    calls: (c) => c.track({ userId: "u-1", anonymousId: "a-1", eventType: "item_viewed" }),
    want: [["item_viewed", "u-1", "a-1"]],
  },
  {
    name: "identify with both ids links them",
    calls: (c) => c.identify({ userId: "u-1", anonymousId: "a-1", traits: { plan: "pro" } }),
    want: [["context_identified", "u-1", "a-1"]],
  },
  {
    name: "identify without anonymousId sends the user id only, and is not remembered",
    calls: (c) => {
      c.identify({ userId: "u-1" });
      c.track({ anonymousId: "a-2", eventType: "item_viewed" });
    },
    want: [["context_identified", "u-1", undefined], ["item_viewed", undefined, "a-2"]],
  },
  {
    name: "getUser gives the ids of events that name none",
    opts: { getUser: () => ({ userId: "u-9", anonymousId: "a-9" }) },
    calls: (c) => {
      c.track({ eventType: "item_viewed" });
      c.identify({ userId: "u-9" });
    },
    want: [["item_viewed", "u-9", "a-9"], ["context_identified", "u-9", "a-9"]],
  },
  {
    name: "getUser's anonymous id only for getUser's user",
    opts: { getUser: () => ({ userId: "u-9", anonymousId: "a-9" }) },
    calls: (c) => {
      c.track({ userId: "someone-else", eventType: "item_viewed" });
      c.identify({ userId: "someone-else" });
    },
    want: [["item_viewed", "someone-else", undefined], ["context_identified", "someone-else", undefined]],
  },
  {
    name: "getUser with an anonymous id only",
    opts: { getUser: () => ({ anonymousId: "a-9" }) },
    calls: (c) => c.track({ eventType: "item_viewed" }),
    want: [["item_viewed", undefined, "a-9"]],
  },
  {
    name: "reset in Node makes no id up",
    calls: (c) => {
      c.reset();
      c.track({ userId: "u-1", eventType: "item_viewed" });
    },
    want: [["item_viewed", "u-1", undefined]],
  },
];

for (const tc of cases) {
  test("ids: " + tc.name, async (t) => {
    const { events, raw, errors } = await ids(t, tc.opts, tc.calls);
    assert.deepEqual(errors, []);
    assert.deepEqual(events, tc.want);
    for (const e of raw) {
      if (e.anonymous_id === undefined) assert.ok(!("anonymous_id" in e), "absent, not null");
      if (e.user_id === undefined) assert.ok(!("user_id" in e), "absent, not null");
    }
  });
}

test("ids: an event without any id, or with ids that are not strings, is refused", async (t) => {
  const { events, errors } = await ids(t, {}, (c) => {
    c.track({ eventType: "item_viewed" });
    c.track({ userId: "", anonymousId: "", eventType: "item_viewed" });
    c.track({ userId: 42, eventType: "item_viewed" });
    c.track({ anonymousId: { a: 1 }, eventType: "item_viewed" });
    c.identify({ anonymousId: "a-1" });
    c.trackPageView();
  });
  assert.deepEqual(events, []);
  assert.equal(errors.length, 5);
  for (const m of errors.slice(0, 4)) assert.match(m, /userId or anonymousId/);
  assert.match(errors[4], /identify needs a userId/);
});

test("anonymousId() in Node: getUser's, else undefined (never made up)", () => {
  const plain = new Client({ apiUrl: "http://127.0.0.1:9", apiKey: "sk_x" });
  assert.equal(plain.anonymousId(), undefined);
  const ctx = new Client({ apiUrl: "http://127.0.0.1:9", apiKey: "sk_x", getUser: () => ({ anonymousId: "a-3" }) });
  assert.equal(ctx.anonymousId(), "a-3");
});
