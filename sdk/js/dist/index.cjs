"use strict";
var __defProp = Object.defineProperty;
var __getOwnPropDesc = Object.getOwnPropertyDescriptor;
var __getOwnPropNames = Object.getOwnPropertyNames;
var __hasOwnProp = Object.prototype.hasOwnProperty;
var __export = (target, all) => {
  for (var name in all)
    __defProp(target, name, { get: all[name], enumerable: true });
};
var __copyProps = (to, from, except, desc) => {
  if (from && typeof from === "object" || typeof from === "function") {
    for (let key of __getOwnPropNames(from))
      if (!__hasOwnProp.call(to, key) && key !== except)
        __defProp(to, key, { get: () => from[key], enumerable: !(desc = __getOwnPropDesc(from, key)) || desc.enumerable });
  }
  return to;
};
var __toCommonJS = (mod) => __copyProps(__defProp({}, "__esModule", { value: true }), mod);

// src/index.ts
var index_exports = {};
__export(index_exports, {
  Client: () => Client,
  aiReferral: () => aiReferral,
  uuidv7: () => uuidv7
});
module.exports = __toCommonJS(index_exports);

// src/uuid.ts
var pool = new Uint8Array(256);
var used = pool.length;
var cryptoObj = globalThis.crypto;
function refill() {
  if (cryptoObj && cryptoObj.getRandomValues) cryptoObj.getRandomValues(pool);
  else for (let i = 0; i < pool.length; i++) pool[i] = Math.random() * 256 | 0;
  used = 0;
}
var hex = [];
for (let i = 0; i < 256; i++) hex.push((i + 256).toString(16).slice(1));
var lastMs = -1;
var seq = 0;
function uuidv7() {
  let ms = Date.now();
  if (used + 9 > pool.length) refill();
  if (ms > lastMs) {
    lastMs = ms;
    seq = pool[used++] << 3;
  } else if (++seq > 4095) {
    lastMs++;
    seq = 0;
  }
  ms = lastMs;
  const p = pool;
  const u = used;
  used += 8;
  const hi = Math.floor(ms / 16777216);
  const lo = ms % 16777216;
  return hex[hi >>> 16 & 255] + hex[hi >>> 8 & 255] + hex[hi & 255] + hex[lo >>> 16 & 255] + "-" + hex[lo >>> 8 & 255] + hex[lo & 255] + "-" + hex[112 | seq >>> 8] + hex[seq & 255] + "-" + hex[128 | p[u] & 63] + hex[p[u + 1]] + "-" + hex[p[u + 2]] + hex[p[u + 3]] + hex[p[u + 4]] + hex[p[u + 5]] + hex[p[u + 6]] + hex[p[u + 7]];
}

// src/referral.ts
var HOSTS = [
  ["chatgpt.com", "chatgpt"],
  ["chat.openai.com", "chatgpt"],
  ["perplexity.ai", "perplexity"],
  ["claude.ai", "claude"],
  ["gemini.google.com", "gemini"],
  ["copilot.microsoft.com", "copilot"]
];
var UTM = [
  [/chatgpt|openai/, "chatgpt"],
  [/perplexity/, "perplexity"],
  [/claude/, "claude"],
  [/gemini/, "gemini"],
  [/copilot/, "copilot"]
];
var QUERY_PARAMS = ["q", "query", "prompt"];
function parse(u) {
  try {
    return u ? new URL(u) : null;
  } catch {
    return null;
  }
}
function hostProvider(host) {
  host = host.toLowerCase().replace(/\.$/, "");
  for (const [h, name] of HOSTS) if (host === h || host.endsWith("." + h)) return name;
  return null;
}
function aiReferral(landingUrl, referrerUrl) {
  const landing = parse(landingUrl);
  const ref = parse(referrerUrl);
  let provider = ref ? hostProvider(ref.hostname) : null;
  const utm = landing ? (landing.searchParams.get("utm_source") || "").toLowerCase() : "";
  if (!provider && utm) {
    const u = parse("https://" + utm.replace(/^[a-z]+:\/\//, ""));
    provider = u && hostProvider(u.hostname);
    for (const [re, name] of UTM) if (!provider && re.test(utm)) provider = name;
  }
  if (!provider) return null;
  let hint = null;
  for (const src of [ref, landing]) {
    for (const k of QUERY_PARAMS) if (!hint && src) hint = src.searchParams.get(k) || null;
  }
  if (!hint && landing) hint = landing.searchParams.get("utm_term") || null;
  return { source_provider: provider, query_hint: hint, landing_url: landingUrl, referrer_url: referrerUrl };
}

// src/store.ts
var PREFIX = "cohort_q_";
var MAX_STORED_EVENTS = 1e3;
var MAX_STORED_CHARS = 1 << 20;
var MAX_AGE_MS = 7 * 24 * 3600 * 1e3;
var STALE_MS = 10 * 60 * 1e3;
function ls() {
  try {
    return typeof localStorage != "undefined" ? localStorage : null;
  } catch {
    return null;
  }
}
function locks() {
  return typeof navigator != "undefined" && navigator.locks;
}
var Store = class {
  /** ns names the destination (API URL and key): only events for it are claimed. onOwned runs once
   * the tab owns its key, when writing is allowed. */
  constructor(ns, _onOwned) {
    this._onOwned = _onOwned;
    this._owned = false;
    this._ns = PREFIX + ns + "_";
    this._key = this._ns + Math.random().toString(36).slice(2, 12);
    const l = locks();
    if (l) {
      l.request(this._key, () => {
        this._own();
        return new Promise(() => {
        });
      }).catch(() => {
      });
    } else this._own();
  }
  _own() {
    this._owned = true;
    this._onOwned();
  }
  /** save replaces this tab's stored events, keeping the newest within the caps; closed marks the
   * tab as gone (pagehide). */
  _save(events, closed) {
    const s = ls();
    if (!s || !this._owned) return;
    try {
      if (!events.length) return s.removeItem(this._key);
      let n = 0;
      let i = events.length;
      const min = Date.now() - MAX_AGE_MS;
      while (i > 0 && events.length - i < MAX_STORED_EVENTS && events[i - 1][0] > min) {
        n += events[i - 1][1].length + 20;
        if (n > MAX_STORED_CHARS) break;
        i--;
      }
      const doc = { h: Date.now(), e: events.slice(i) };
      if (closed) doc.c = 1;
      s.setItem(this._key, JSON.stringify(doc));
    } catch {
    }
  }
  /** claim takes the stored events of tabs that are gone and hands them to take. */
  _claim(take) {
    const s = ls();
    if (!s) return;
    const l = locks();
    const run = (live) => {
      const out = [];
      const min = Date.now() - MAX_AGE_MS;
      const keys = [];
      for (let i = 0; i < s.length; i++) keys.push(s.key(i) || "");
      for (const k of keys) {
        if (k === this._key || k.indexOf(this._ns) !== 0) continue;
        try {
          const doc = JSON.parse(s.getItem(k) || "null");
          if (live ? live.has(k) : doc && !doc.c && doc.h > Date.now() - STALE_MS) continue;
          s.removeItem(k);
          for (const e of doc && doc.e || []) if (e[0] > min && typeof e[1] == "string") out.push(e);
        } catch {
          s.removeItem(k);
        }
      }
      if (out.length) take(out.sort((a, b) => a[0] - b[0]));
    };
    if (!l) return run(null);
    l.request(PREFIX + "claim", async () => {
      const q = await l.query();
      run(new Set((q.held || []).map((x) => x.name)));
    }).catch(() => {
    });
  }
};

// src/identity.ts
var ANON_KEY = "cohort_anonymous_id";
var USER_KEY = "cohort_user_id";
var MAX_AGE = 31536e3;
var domain;
function cookieDomain() {
  if (domain == null) {
    domain = "";
    const h = location.hostname;
    const p = h.split(".");
    if (p.length > 1 && !/^[\d.]+$|:/.test(h)) {
      for (let i = p.length - 2; i >= 0 && !domain; i--) {
        const d = p.slice(i).join(".");
        const probe = "cohort_probe=1;path=/;domain=" + d;
        document.cookie = probe;
        if (document.cookie.indexOf("cohort_probe=1") >= 0) {
          document.cookie = probe + ";max-age=0";
          domain = d;
        }
      }
    }
  }
  return domain;
}
function load(k) {
  let v = null;
  try {
    v = ls().getItem(k);
  } catch {
  }
  try {
    v = v || decodeURIComponent((document.cookie.match("(?:^|; )" + k + "=([^;]+)") || [])[1] || "") || null;
  } catch {
  }
  if (v) save(k, v);
  return v;
}
function save(k, v) {
  try {
    const s = ls();
    if (s) v == null ? s.removeItem(k) : s.setItem(k, v);
  } catch {
  }
  try {
    const d = cookieDomain();
    document.cookie = k + "=" + encodeURIComponent(v || "") + ";path=/;max-age=" + (v == null ? 0 : MAX_AGE) + (d ? ";domain=" + d : "") + ";SameSite=Lax" + (location.protocol == "https:" ? ";Secure" : "");
  } catch {
  }
}

// src/client.ts
var MAX_EVENTS = 500;
var MAX_REQUEST_CHARS = 512 * 1024;
var MAX_EVENT_CHARS = 32 * 1024;
var MAX_QUEUE = 1e5;
var KEEPALIVE_BUDGET = 6e4;
var REQUEST_TIMEOUT = 3e4;
var MAX_BACKOFF = 3e4;
var MAX_RETRY_AFTER = 3e5;
var EVENT_TYPE = /^[a-z][a-z0-9_]{0,127}$/;
var BATCH_PATH = "/api/ingestion/track/batch/";
var referred = false;
var sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function hash(s) {
  let h = 5381;
  for (let i = 0; i < s.length; i++) h = h * 33 ^ s.charCodeAt(i);
  return (h >>> 0).toString(36);
}
var Client = class {
  // browser: the user id given to identify, once read (null: none)
  constructor(o) {
    this._q = [];
    this._inflight = /* @__PURE__ */ new Set();
    this._active = 0;
    this._enq = 0;
    // events ever queued
    this._done = 0;
    // events delivered or dropped
    this._forced = 0;
    // events up to this count go out without waiting for a full batch
    this._waiters = [];
    this._timer = 0;
    this._saving = 0;
    this._closed = false;
    this._hidden = false;
    this._ka = 0;
    // bytes of keepalive requests in flight
    this._tok = null;
    this._hs = null;
    this._store = null;
    if (!o || !o.apiUrl || !o.apiKey) throw new TypeError("Cohort: apiUrl and apiKey are required");
    if (typeof fetch != "function") throw new TypeError("Cohort: the Fetch API is required (Node >= 18 or a modern browser)");
    this._url = o.apiUrl.replace(/\/+$/, "");
    this._key = o.apiKey;
    this._pk = o.apiKey.indexOf("pk_") == 0;
    this._batch = o.batch !== false;
    this._size = Math.max(1, Math.min(MAX_EVENTS, o.batchSize || 20));
    this._interval = o.flushInterval == null ? 5e3 : o.flushInterval;
    this._retries = o.maxRetries == null ? 5 : o.maxRetries;
    this._base = o.retryDelay == null ? 500 : o.retryDelay;
    this._getUser = o.getUser;
    this._onError = o.onError || ((e) => console.error(e));
    this._browser = typeof window != "undefined" && typeof document != "undefined";
    if (!this._browser) return;
    if (o.apiKey.indexOf("sk_") == 0) {
      console.warn("Cohort: a secret key (sk_) in a web page is readable by every visitor; use a public key (pk_).");
    }
    const claim = () => this._store && this._store._claim((ev) => this._restore(ev));
    this._store = new Store(hash(this._url + "\n" + this._key), () => {
      this._save();
      claim();
    });
    addEventListener("pagehide", () => this._hide(true));
    addEventListener("storage", (e) => {
      if (!e.key || e.key == ANON_KEY || e.key == USER_KEY) this._aid = this._uid = void 0;
    });
    addEventListener("pageshow", () => this._hidden = false);
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState == "hidden") this._hide(false);
      else claim();
    });
  }
  /** track queues an event; it never throws and never waits. */
  track(e) {
    this._add(e && e.userId, e && e.anonymousId, e && e.eventType, e && e.payload, e && e.occurredAt);
  }
  /** identify sends a context_identified event with traits as payload, carrying the user id and
   * the anonymous id, which links the two. In a browser the user id is remembered (persisted) for
   * later events; identifying another user than the remembered one starts a new anonymous id
   * first, so one anonymous id never names two users. */
  identify(o) {
    const id = o && o.userId;
    if (!id || typeof id != "string") return this._fail("identify needs a userId", 1);
    if (this._browser && id != this._who()) {
      if (this._uid) this._renew();
      save(USER_KEY, this._uid = id);
    }
    this._add(id, o.anonymousId, "context_identified", o.traits);
  }
  /** reset (logout, browsers): forgets the identified user and starts a new anonymous id. */
  reset() {
    if (!this._browser) return;
    save(USER_KEY, this._uid = null);
    this._renew();
  }
  /** anonymousId is the visitor's anonymous id: in a browser a UUIDv7 made on first use and
   * persisted (localStorage and a first-party cookie); in Node getUser's, if any (never made up). */
  anonymousId() {
    if (!this._browser) return this._user().anonymousId;
    if (!this._aid) {
      const a = load(ANON_KEY);
      if (a && a.length < 256) this._aid = a;
      else this._renew();
    }
    return this._aid;
  }
  _renew() {
    save(ANON_KEY, this._aid = uuidv7());
  }
  /** who is the user id identify remembered (browsers). */
  _who() {
    if (this._uid === void 0) this._uid = load(USER_KEY);
    return this._uid || void 0;
  }
  /** trackPageView sends page_viewed (and ai_referral_session, once per page load, when the
   * visit came from a known AI assistant); a no-op outside a browser. */
  trackPageView(o = {}) {
    if (!this._browser) return;
    const user = o.userId;
    const href = location.href;
    const ref = document.referrer;
    this._add(user, 0, "page_viewed", { path: o.path || location.pathname, url: href, referrer: ref, title: document.title });
    const ai = referred ? null : aiReferral(href, ref);
    if (ai) {
      referred = true;
      this._add(user, 0, "ai_referral_session", ai);
    }
  }
  /** flush sends every queued event now; it resolves once they are delivered or dropped. */
  flush() {
    const target = this._forced = this._enq;
    this._pump();
    return this._done >= target ? Promise.resolve() : new Promise((r) => this._waiters.push([target, r]));
  }
  /** shutdown stops the timer, refuses further events and flushes the rest. */
  shutdown() {
    this._closed = true;
    clearTimeout(this._timer);
    this._timer = 0;
    return this.flush();
  }
  /** add queues an event of user and anon; what the call leaves out comes from getUser (whose
   * anonymous id only for its own user), then in a browser from identify and the visitor's id. */
  _add(user, anon, type, payload, at) {
    if (this._closed) return this._fail("the client is shut down; event dropped", 1);
    if (this._getUser && !(user && anon)) {
      const c = this._user();
      if (!anon && (!user || !c.userId || c.userId == user)) anon = c.anonymousId;
      user = user || c.userId;
    }
    if (this._browser) {
      user = user || this._who();
      anon = anon || this.anonymousId();
    }
    if (user && typeof user != "string" || anon && typeof anon != "string" || !(user || anon)) {
      return this._fail("userId or anonymousId (a string) is required", 1);
    }
    if (typeof type != "string" || !EVENT_TYPE.test(type)) return this._fail(`eventType ${JSON.stringify(type)} is not snake_case`, 1);
    if (payload != null && (typeof payload != "object" || Array.isArray(payload))) return this._fail("payload must be an object", 1);
    const now = Date.now();
    let s;
    try {
      s = JSON.stringify({
        user_id: user || void 0,
        anonymous_id: anon || void 0,
        event_type: type,
        occurred_at: new Date(at == null ? now : at).toISOString(),
        payload: payload || void 0,
        message_id: uuidv7()
      });
    } catch (err) {
      return this._fail("event not serializable: " + err.message, 1);
    }
    if (s.length > MAX_EVENT_CHARS) return this._fail("event larger than 32 KiB", 1);
    this._q.push([now, s]);
    this._enq++;
    if (this._q.length > MAX_QUEUE) {
      this._q.shift();
      this._settle(1);
      this._fail("queue full: dropped the oldest event", 1);
    }
    if (!this._batch) this._forced = this._enq;
    if (this._store && this._pk && !this._hs && !(this._tok && now < this._tok.r)) this._token().catch(() => {
    });
    this._pump();
    this._dirty();
  }
  /** pump starts requests while there is a full batch (or forced events) and a free slot. */
  _pump() {
    const slots = this._batch ? 1 : 8;
    while (this._active < slots && this._q.length && (this._q.length >= this._size || this._enq - this._q.length < this._forced)) {
      const chunk = this._take(this._batch ? MAX_EVENTS : 1);
      this._active++;
      this._inflight.add(chunk);
      const fin = () => {
        this._active--;
        this._inflight.delete(chunk);
        this._settle(chunk.length);
        this._pump();
        this._dirty();
      };
      this._send(chunk).then(fin, fin);
    }
    if (!this._q.length || this._closed) {
      clearTimeout(this._timer);
      this._timer = 0;
    } else if (!this._timer) {
      this._timer = setTimeout(() => {
        this._timer = 0;
        this.flush();
      }, this._interval);
    }
  }
  _take(max) {
    let n = 0;
    let chars = 0;
    while (n < this._q.length && n < max && (n == 0 || chars + this._q[n][1].length < MAX_REQUEST_CHARS)) chars += this._q[n++][1].length;
    return this._q.splice(0, n);
  }
  _settle(n) {
    this._done += n;
    this._waiters = this._waiters.filter(([t, r]) => this._done >= t ? (r(), false) : true);
  }
  /** send delivers one chunk: retries with backoff, a new session token on 401 (once). It never
   * rejects: what cannot be delivered is reported to onError. */
  async _send(chunk) {
    let renewed = false;
    for (let attempt = 0; ; ) {
      let a = null;
      let err = "network error";
      try {
        const tok = this._pk ? await this._token() : "";
        a = await this._post(BATCH_PATH, tok ? "Bearer " + tok : "ApiKey " + this._key, this._body(chunk));
      } catch (e) {
        if (e && e.s) a = e;
        else err += ": " + (e && e.message);
      }
      if (a && a.s >= 200 && a.s < 300) {
        const rej = a.b && a.b.errors || [];
        if (rej.length) {
          this._fail(
            `${rej.length} of ${chunk.length} events rejected: ` + rej.slice(0, 5).map((x) => `events[${x.index}] ${x.code}: ${x.message}`).join("; "),
            rej.length,
            a.s,
            rej[0].code
          );
        }
        return;
      }
      if (a && a.s == 401 && this._pk && !renewed) {
        renewed = true;
        this._tok = null;
        continue;
      }
      const s = a ? a.s : 0;
      if (s && s != 408 && s != 429 && s < 500 || attempt >= this._retries) {
        const d = a && a.b && a.b.error;
        const msg = d ? `${s} ${d.code}: ${d.message}` : s ? "HTTP " + s : err;
        return this._fail(`${chunk.length} events not delivered: ${msg}`, chunk.length, s || void 0, d && d.code);
      }
      await sleep(this._backoff(attempt++, a && a.h));
    }
  }
  /** backoff is Retry-After when the server sent one, else exponential with jitter. */
  _backoff(attempt, retryAfter) {
    if (retryAfter) {
      const ms = /^\s*\d+\s*$/.test(retryAfter) ? +retryAfter * 1e3 : Date.parse(retryAfter) - Date.now();
      if (ms >= 0) return Math.min(ms, MAX_RETRY_AFTER);
    }
    const d = Math.min(MAX_BACKOFF, this._base * 2 ** attempt);
    return d / 2 + Math.random() * d / 2;
  }
  /** body is a batch request: each event stamped with this request's sent_at, so the server can
   * correct the client's clock; beacons carry the session token first, as the server reads it. */
  _body(chunk, token) {
    const head = `{"sent_at":"${(/* @__PURE__ */ new Date()).toISOString()}",`;
    let out = token ? `{"session_token":${JSON.stringify(token)},"events":[` : `{"events":[`;
    for (let i = 0; i < chunk.length; i++) out += (i ? "," : "") + head + chunk[i][1].slice(1);
    return out + "]}";
  }
  async _post(path, auth, body) {
    const AS = typeof AbortSignal != "undefined" ? AbortSignal : null;
    const res = await fetch(this._url + path, {
      method: "POST",
      headers: { Authorization: auth, "Content-Type": "application/json" },
      body,
      signal: AS && AS.timeout ? AS.timeout(REQUEST_TIMEOUT) : void 0
    });
    let b = null;
    try {
      b = await res.json();
    } catch {
    }
    return { s: res.status, h: res.headers.get("Retry-After"), b };
  }
  _user() {
    try {
      return this._getUser && this._getUser() || {};
    } catch (e) {
      this._fail("getUser failed: " + e.message, 0);
      return {};
    }
  }
  /** token is the cached session token for the current user, refreshed before it expires; one
   * handshake at a time. A failed handshake throws its Answer. */
  _token() {
    const u = this._user();
    const anon = u.anonymousId || (this._browser ? this.anonymousId() : void 0);
    const k = u.userId + "\n" + anon;
    const t = this._tok;
    if (t && t.k == k && Date.now() < t.r) return Promise.resolve(t.t);
    if (!this._hs) {
      this._hs = this._post("/api/auth/session/", "ApiKey " + this._key, JSON.stringify({
        user_id: u.userId,
        anonymous_id: anon,
        user_id_sig: u.userIdSig,
        user_id_ts: u.userIdTs
      })).then((a) => {
        const b = a.b || {};
        if (a.s < 200 || a.s > 299 || typeof b.token != "string") throw a.s < 300 ? { ...a, s: 502 } : a;
        const now = Date.now();
        const life = b.expires_in > 0 ? b.expires_in * 1e3 : Date.parse(b.expires_at) - now || 0;
        this._tok = { t: b.token, k, e: now + life, r: now + life - Math.min(6e4, life / 5) };
        return b.token;
      });
      const clear = () => this._hs = null;
      this._hs.then(clear, clear);
    }
    return this._hs;
  }
  /** hide sends the queue with keepalive requests (or sendBeacon) that outlive the page, within
   * the 64 KiB budget; what does not fit, or cannot be sent now, stays stored for the next load. */
  _hide(closing) {
    if (closing) this._hidden = true;
    const t = this._tok;
    const token = this._pk ? t && Date.now() < t.e - 5e3 ? t.t : "" : "";
    if (navigator.onLine !== false && (token || !this._pk)) {
      const enc = new TextEncoder();
      let budget = KEEPALIVE_BUDGET - this._ka;
      while (this._q.length) {
        let size = 40 + token.length;
        let n = 0;
        for (; n < this._q.length && n < MAX_EVENTS; n++) {
          const len = enc.encode(this._q[n][1]).length + 40;
          if (size + len > budget) break;
          size += len;
        }
        if (!n) break;
        const chunk = this._q.splice(0, n);
        if (!this._beacon(chunk, token, size)) {
          this._q.unshift(...chunk);
          break;
        }
        budget -= size;
        this._settle(n);
      }
    }
    clearTimeout(this._saving);
    this._saving = 0;
    this._save();
  }
  _beacon(chunk, token, size) {
    const url = this._url + BATCH_PATH;
    const body = this._body(chunk, token);
    if (typeof Request != "undefined" && "keepalive" in Request.prototype) {
      const again = () => {
        this._q.unshift(...chunk);
        this._enq += chunk.length;
        this._forced = this._enq;
        if (!this._hidden) this._pump();
        this._save();
      };
      this._ka += size;
      fetch(url, {
        method: "POST",
        keepalive: true,
        // text/plain with the token in the body is a simple request: no preflight before unload.
        headers: token ? { "Content-Type": "text/plain" } : { Authorization: "ApiKey " + this._key, "Content-Type": "application/json" },
        body
      }).then((r) => {
        this._ka -= size;
        const s = r.status;
        if (s == 401 || s == 408 || s == 429 || s >= 500) again();
        else if (s >= 400) this._fail(`${chunk.length} events not delivered: HTTP ${s}`, chunk.length, s);
      }, () => {
        this._ka -= size;
        again();
      });
      return true;
    }
    return !!token && navigator.sendBeacon(url, body);
  }
  /** restore queues events another (closed) tab left stored, and sends them now. */
  _restore(ev) {
    this._q.unshift(...ev);
    this._enq += ev.length;
    this._forced = this._enq;
    this._pump();
    this._save();
  }
  _dirty() {
    if (this._store && !this._saving) {
      this._saving = setTimeout(() => {
        this._saving = 0;
        this._save();
      }, 0);
    }
  }
  /** save stores every event not yet confirmed: those in requests, then the queue. */
  _save() {
    if (!this._store) return;
    const all = [];
    this._inflight.forEach((c) => all.push(...c));
    this._store._save(all.concat(this._q), this._hidden);
  }
  _fail(msg, events, status, code) {
    const e = new Error("Cohort: " + msg);
    e.events = events;
    if (status) e.status = status;
    if (code) e.code = code;
    try {
      this._onError(e);
    } catch {
    }
  }
};
// Annotate the CommonJS export names for ESM import in node:
0 && (module.exports = {
  Client,
  aiReferral,
  uuidv7
});
