import { uuidv7 } from "./uuid";
import { aiReferral } from "./referral";
import { Store, Stored } from "./store";
import { ANON_KEY, USER_KEY, load, save } from "./identity";

/** The current user, as the session handshake of a public key (pk_) needs it. */
export interface UserContext {
  userId?: string;
  anonymousId?: string;
  /** Hex HMAC-SHA256 of "userId:userIdTs", made on your backend with the tenant's identity secret. */
  userIdSig?: string;
  /** Unix seconds paired with userIdSig. */
  userIdTs?: number;
}

export interface ClientOptions {
  /** Base URL of the deployment, e.g. https://cohort.example.com */
  apiUrl: string;
  /** sk_ authenticates directly (servers only); pk_ triggers the session handshake. */
  apiKey: string;
  /** Current user context: the ids of events that name none, and the pk_ handshake. */
  getUser?: () => UserContext | null | undefined;
  /** false sends every event immediately. Default true. */
  batch?: boolean;
  /** Events queued before an automatic flush. Default 20. */
  batchSize?: number;
  /** Milliseconds between automatic flushes. Default 5000. */
  flushInterval?: number;
  /** Called when events could not be delivered. Default console.error. */
  onError?: (err: CohortError) => void;
  /** Attempts after the first for a request that failed for a retryable reason. Default 5. */
  maxRetries?: number;
  /** Base of the exponential backoff in milliseconds. Default 500. */
  retryDelay?: number;
}

/** An event names its subject by userId, anonymousId or both; what the call leaves out comes from
 * getUser and, in a browser, from identify and the visitor's anonymous id. */
export interface TrackEvent {
  userId?: string;
  anonymousId?: string;
  eventType: string;
  occurredAt?: string | Date;
  payload?: Record<string, unknown>;
}

/** The Error given to onError: status and code are the server's, when there was an answer;
 * events is how many events were dropped because of it. */
export interface CohortError extends Error {
  status?: number;
  code?: string;
  events: number;
}

/** Limits of the batch endpoint (server-side: 500 events, 4 MiB per request, 32 KiB per event). */
const MAX_EVENTS = 500;
const MAX_REQUEST_CHARS = 512 * 1024;
const MAX_EVENT_CHARS = 32 * 1024;
/** Events held in memory at most; beyond that the oldest is dropped. */
const MAX_QUEUE = 100000;
/** Browsers allow 64 KiB of keepalive bodies in flight; keep a margin. */
const KEEPALIVE_BUDGET = 60000;
const REQUEST_TIMEOUT = 30000;
const MAX_BACKOFF = 30000;
const MAX_RETRY_AFTER = 300000;
const EVENT_TYPE = /^[a-z][a-z0-9_]{0,127}$/;
const BATCH_PATH = "/api/ingestion/track/batch/";

let referred = false;

interface Answer {
  s: number; // status
  h: string | null; // Retry-After
  b: any; // JSON body
}

interface Token {
  t: string;
  k: string; // whose: userId and anonymousId
  e: number; // expires
  r: number; // refresh from
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function hash(s: string): string {
  let h = 5381;
  for (let i = 0; i < s.length; i++) h = (h * 33) ^ s.charCodeAt(i);
  return (h >>> 0).toString(36);
}

export class Client {
  private _url: string;
  private _key: string;
  private _pk: boolean;
  private _size: number;
  private _interval: number;
  private _batch: boolean;
  private _retries: number;
  private _base: number;
  private _getUser?: () => UserContext | null | undefined;
  private _onError: (err: CohortError) => void;
  private _q: Stored[] = [];
  private _inflight = new Set<Stored[]>();
  private _active = 0;
  private _enq = 0; // events ever queued
  private _done = 0; // events delivered or dropped
  private _forced = 0; // events up to this count go out without waiting for a full batch
  private _waiters: [number, () => void][] = [];
  private _timer: any = 0;
  private _saving: any = 0;
  private _closed = false;
  private _hidden = false;
  private _ka = 0; // bytes of keepalive requests in flight
  private _tok: Token | null = null;
  private _hs: Promise<string> | null = null;
  private _browser: boolean;
  private _store: Store | null = null;
  private _aid?: string; // browser: the visitor's anonymous id, once read
  private _uid?: string | null; // browser: the user id given to identify, once read (null: none)

  constructor(o: ClientOptions) {
    if (!o || !o.apiUrl || !o.apiKey) throw new TypeError("Cohort: apiUrl and apiKey are required");
    if (typeof fetch != "function") throw new TypeError("Cohort: the Fetch API is required (Node >= 18 or a modern browser)");
    this._url = o.apiUrl.replace(/\/+$/, "");
    this._key = o.apiKey;
    this._pk = o.apiKey.indexOf("pk_") == 0;
    this._batch = o.batch !== false;
    this._size = Math.max(1, Math.min(MAX_EVENTS, o.batchSize || 20));
    this._interval = o.flushInterval == null ? 5000 : o.flushInterval;
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
    // Another tab identified, reset or cleared storage: read the ids again.
    addEventListener("storage", (e) => {
      if (!e.key || e.key == ANON_KEY || e.key == USER_KEY) this._aid = this._uid = undefined;
    });
    addEventListener("pageshow", () => (this._hidden = false));
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState == "hidden") this._hide(false);
      else claim();
    });
  }

  /** track queues an event; it never throws and never waits. */
  track(e: TrackEvent): void {
    this._add(e && e.userId, e && e.anonymousId, e && e.eventType, e && e.payload, e && e.occurredAt);
  }

  /** identify sends a context_identified event with traits as payload, carrying the user id and
   * the anonymous id, which links the two. In a browser the user id is remembered (persisted) for
   * later events; identifying another user than the remembered one starts a new anonymous id
   * first, so one anonymous id never names two users. */
  identify(o: { userId: string; anonymousId?: string; traits?: Record<string, unknown> }): void {
    const id = o && o.userId;
    if (!id || typeof id != "string") return this._fail("identify needs a userId", 1);
    if (this._browser && id != this._who()) {
      if (this._uid) this._renew();
      save(USER_KEY, (this._uid = id));
    }
    this._add(id, o.anonymousId, "context_identified", o.traits);
  }

  /** reset (logout, browsers): forgets the identified user and starts a new anonymous id. */
  reset(): void {
    if (!this._browser) return;
    save(USER_KEY, (this._uid = null));
    this._renew();
  }

  /** anonymousId is the visitor's anonymous id: in a browser a UUIDv7 made on first use and
   * persisted (localStorage and a first-party cookie); in Node getUser's, if any (never made up). */
  anonymousId(): string | undefined {
    if (!this._browser) return this._user().anonymousId;
    if (!this._aid) {
      const a = load(ANON_KEY);
      if (a && a.length < 256) this._aid = a;
      else this._renew();
    }
    return this._aid;
  }

  private _renew(): void {
    save(ANON_KEY, (this._aid = uuidv7()));
  }

  /** who is the user id identify remembered (browsers). */
  private _who(): string | undefined {
    if (this._uid === undefined) this._uid = load(USER_KEY);
    return this._uid || undefined;
  }

  /** trackPageView sends page_viewed (and ai_referral_session, once per page load, when the
   * visit came from a known AI assistant); a no-op outside a browser. */
  trackPageView(o: { userId?: string; path?: string } = {}): void {
    if (!this._browser) return;
    const user = o.userId;
    const href = location.href;
    const ref = document.referrer;
    this._add(user, 0, "page_viewed", { path: o.path || location.pathname, url: href, referrer: ref, title: document.title });
    const ai = referred ? null : aiReferral(href, ref);
    if (ai) {
      referred = true;
      this._add(user, 0, "ai_referral_session", ai as any);
    }
  }

  /** flush sends every queued event now; it resolves once they are delivered or dropped. */
  flush(): Promise<void> {
    const target = (this._forced = this._enq);
    this._pump();
    return this._done >= target ? Promise.resolve() : new Promise((r) => this._waiters.push([target, r]));
  }

  /** shutdown stops the timer, refuses further events and flushes the rest. */
  shutdown(): Promise<void> {
    this._closed = true;
    clearTimeout(this._timer);
    this._timer = 0;
    return this.flush();
  }

  /** add queues an event of user and anon; what the call leaves out comes from getUser (whose
   * anonymous id only for its own user), then in a browser from identify and the visitor's id. */
  private _add(user: any, anon: any, type: unknown, payload?: unknown, at?: string | Date): void {
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
    if ((user && typeof user != "string") || (anon && typeof anon != "string") || !(user || anon)) {
      return this._fail("userId or anonymousId (a string) is required", 1);
    }
    if (typeof type != "string" || !EVENT_TYPE.test(type)) return this._fail(`eventType ${JSON.stringify(type)} is not snake_case`, 1);
    if (payload != null && (typeof payload != "object" || Array.isArray(payload))) return this._fail("payload must be an object", 1);
    const now = Date.now();
    let s: string;
    try {
      s = JSON.stringify({
        user_id: user || undefined,
        anonymous_id: anon || undefined,
        event_type: type,
        occurred_at: new Date(at == null ? now : at).toISOString(),
        payload: payload || undefined,
        message_id: uuidv7(),
      });
    } catch (err) {
      return this._fail("event not serializable: " + (err as Error).message, 1);
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
    // In a browser, have a session token ready before the page may be hidden: a beacon cannot wait
    // for a handshake.
    if (this._store && this._pk && !this._hs && !(this._tok && now < this._tok.r)) this._token().catch(() => {});
    this._pump();
    this._dirty();
  }

  /** pump starts requests while there is a full batch (or forced events) and a free slot. */
  private _pump(): void {
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

  private _take(max: number): Stored[] {
    let n = 0;
    let chars = 0;
    while (n < this._q.length && n < max && (n == 0 || chars + this._q[n][1].length < MAX_REQUEST_CHARS)) chars += this._q[n++][1].length;
    return this._q.splice(0, n);
  }

  private _settle(n: number): void {
    this._done += n;
    this._waiters = this._waiters.filter(([t, r]) => (this._done >= t ? (r(), false) : true));
  }

  /** send delivers one chunk: retries with backoff, a new session token on 401 (once). It never
   * rejects: what cannot be delivered is reported to onError. */
  private async _send(chunk: Stored[]): Promise<void> {
    let renewed = false;
    for (let attempt = 0; ; ) {
      let a: Answer | null = null;
      let err = "network error";
      try {
        const tok = this._pk ? await this._token() : "";
        a = await this._post(BATCH_PATH, tok ? "Bearer " + tok : "ApiKey " + this._key, this._body(chunk));
      } catch (e: any) {
        if (e && e.s) a = e;
        else err += ": " + (e && e.message);
      }
      if (a && a.s >= 200 && a.s < 300) {
        const rej = (a.b && a.b.errors) || [];
        if (rej.length) {
          this._fail(
            `${rej.length} of ${chunk.length} events rejected: ` + rej.slice(0, 5).map((x: any) => `events[${x.index}] ${x.code}: ${x.message}`).join("; "),
            rej.length, a.s, rej[0].code);
        }
        return;
      }
      if (a && a.s == 401 && this._pk && !renewed) {
        renewed = true;
        this._tok = null;
        continue;
      }
      const s = a ? a.s : 0;
      if ((s && s != 408 && s != 429 && s < 500) || attempt >= this._retries) {
        const d = a && a.b && a.b.error;
        const msg = d ? `${s} ${d.code}: ${d.message}` : s ? "HTTP " + s : err;
        return this._fail(`${chunk.length} events not delivered: ${msg}`, chunk.length, s || undefined, d && d.code);
      }
      await sleep(this._backoff(attempt++, a && a.h));
    }
  }

  /** backoff is Retry-After when the server sent one, else exponential with jitter. */
  private _backoff(attempt: number, retryAfter: string | null | undefined): number {
    if (retryAfter) {
      const ms = /^\s*\d+\s*$/.test(retryAfter) ? +retryAfter * 1000 : Date.parse(retryAfter) - Date.now();
      if (ms >= 0) return Math.min(ms, MAX_RETRY_AFTER);
    }
    const d = Math.min(MAX_BACKOFF, this._base * 2 ** attempt);
    return d / 2 + (Math.random() * d) / 2;
  }

  /** body is a batch request: each event stamped with this request's sent_at, so the server can
   * correct the client's clock; beacons carry the session token first, as the server reads it. */
  private _body(chunk: Stored[], token?: string): string {
    const head = `{"sent_at":"${new Date().toISOString()}",`;
    let out = token ? `{"session_token":${JSON.stringify(token)},"events":[` : `{"events":[`;
    for (let i = 0; i < chunk.length; i++) out += (i ? "," : "") + head + chunk[i][1].slice(1);
    return out + "]}";
  }

  private async _post(path: string, auth: string, body: string): Promise<Answer> {
    const AS: any = typeof AbortSignal != "undefined" ? AbortSignal : null;
    const res = await fetch(this._url + path, {
      method: "POST",
      headers: { Authorization: auth, "Content-Type": "application/json" },
      body,
      signal: AS && AS.timeout ? AS.timeout(REQUEST_TIMEOUT) : undefined,
    });
    let b = null;
    try {
      b = await res.json();
    } catch {
      // not JSON
    }
    return { s: res.status, h: res.headers.get("Retry-After"), b };
  }

  private _user(): UserContext {
    try {
      return (this._getUser && this._getUser()) || {};
    } catch (e) {
      this._fail("getUser failed: " + (e as Error).message, 0);
      return {};
    }
  }

  /** token is the cached session token for the current user, refreshed before it expires; one
   * handshake at a time. A failed handshake throws its Answer. */
  private _token(): Promise<string> {
    const u = this._user();
    const anon = u.anonymousId || (this._browser ? this.anonymousId() : undefined);
    const k = u.userId + "\n" + anon;
    const t = this._tok;
    if (t && t.k == k && Date.now() < t.r) return Promise.resolve(t.t);
    if (!this._hs) {
      this._hs = this._post("/api/auth/session/", "ApiKey " + this._key, JSON.stringify({
        user_id: u.userId,
        anonymous_id: anon,
        user_id_sig: u.userIdSig,
        user_id_ts: u.userIdTs,
      })).then((a) => {
        const b = a.b || {};
        if (a.s < 200 || a.s > 299 || typeof b.token != "string") throw a.s < 300 ? { ...a, s: 502 } : a;
        const now = Date.now();
        const life = b.expires_in > 0 ? b.expires_in * 1000 : Date.parse(b.expires_at) - now || 0;
        this._tok = { t: b.token, k, e: now + life, r: now + life - Math.min(60000, life / 5) };
        return b.token;
      });
      const clear = () => (this._hs = null);
      this._hs.then(clear, clear);
    }
    return this._hs;
  }

  /** hide sends the queue with keepalive requests (or sendBeacon) that outlive the page, within
   * the 64 KiB budget; what does not fit, or cannot be sent now, stays stored for the next load. */
  private _hide(closing: boolean): void {
    if (closing) this._hidden = true;
    const t = this._tok;
    const token = this._pk ? (t && Date.now() < t.e - 5000 ? t.t : "") : "";
    if (navigator.onLine !== false && (token || !this._pk)) {
      const enc = new TextEncoder();
      // The budget is shared by every keepalive request in flight, including earlier hides'.
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

  private _beacon(chunk: Stored[], token: string, size: number): boolean {
    const url = this._url + BATCH_PATH;
    const body = this._body(chunk, token);
    if (typeof Request != "undefined" && "keepalive" in Request.prototype) {
      const again = () => {
        // Still alive and the server did not take them: back to the queue (same message ids),
        // sent the normal way (which renews an expired token).
        this._q.unshift(...chunk);
        this._enq += chunk.length;
        this._forced = this._enq;
        // A closing page keeps them stored for the next load instead.
        if (!this._hidden) this._pump();
        this._save();
      };
      this._ka += size;
      fetch(url, {
        method: "POST",
        keepalive: true,
        // text/plain with the token in the body is a simple request: no preflight before unload.
        headers: token ? { "Content-Type": "text/plain" } : { Authorization: "ApiKey " + this._key, "Content-Type": "application/json" },
        body,
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
  private _restore(ev: Stored[]): void {
    this._q.unshift(...ev);
    this._enq += ev.length;
    this._forced = this._enq;
    this._pump();
    this._save();
  }

  private _dirty(): void {
    if (this._store && !this._saving) {
      this._saving = setTimeout(() => {
        this._saving = 0;
        this._save();
      }, 0);
    }
  }

  /** save stores every event not yet confirmed: those in requests, then the queue. */
  private _save(): void {
    if (!this._store) return;
    const all: Stored[] = [];
    this._inflight.forEach((c) => all.push(...c));
    this._store._save(all.concat(this._q), this._hidden);
  }

  private _fail(msg: string, events: number, status?: number, code?: string): void {
    const e = new Error("Cohort: " + msg) as CohortError;
    e.events = events;
    if (status) e.status = status;
    if (code) e.code = code;
    try {
      this._onError(e);
    } catch {
      // the handler's own failure must not break tracking
    }
  }
}
