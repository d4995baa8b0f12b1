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
  private url: string;
  private key: string;
  private pk: boolean;
  private size: number;
  private interval: number;
  private batch: boolean;
  private retries: number;
  private base: number;
  private getUser?: () => UserContext | null | undefined;
  private onError: (err: CohortError) => void;
  private q: Stored[] = [];
  private inflight = new Set<Stored[]>();
  private active = 0;
  private enq = 0; // events ever queued
  private done = 0; // events delivered or dropped
  private forced = 0; // events up to this count go out without waiting for a full batch
  private waiters: [number, () => void][] = [];
  private timer: any = 0;
  private saving: any = 0;
  private closed = false;
  private hidden = false;
  private ka = 0; // bytes of keepalive requests in flight
  private tok: Token | null = null;
  private hs: Promise<string> | null = null;
  private browser: boolean;
  private store: Store | null = null;
  private aid?: string; // browser: the visitor's anonymous id, once read
  private uid?: string | null; // browser: the user id given to identify, once read (null: none)

  constructor(o: ClientOptions) {
    if (!o || !o.apiUrl || !o.apiKey) throw new TypeError("Cohort: apiUrl and apiKey are required");
    if (typeof fetch != "function") throw new TypeError("Cohort: the Fetch API is required (Node >= 18 or a modern browser)");
    this.url = o.apiUrl.replace(/\/+$/, "");
    this.key = o.apiKey;
    this.pk = o.apiKey.indexOf("pk_") == 0;
    this.batch = o.batch !== false;
    this.size = Math.max(1, Math.min(MAX_EVENTS, o.batchSize || 20));
    this.interval = o.flushInterval == null ? 5000 : o.flushInterval;
    this.retries = o.maxRetries == null ? 5 : o.maxRetries;
    this.base = o.retryDelay == null ? 500 : o.retryDelay;
    this.getUser = o.getUser;
    this.onError = o.onError || ((e) => console.error(e));
    this.browser = typeof window != "undefined" && typeof document != "undefined";
    if (!this.browser) return;
    if (o.apiKey.indexOf("sk_") == 0) {
      console.warn("Cohort: a secret key (sk_) in a web page is readable by every visitor; use a public key (pk_).");
    }
    const claim = () => this.store && this.store.claim((ev) => this.restore(ev));
    this.store = new Store(hash(this.url + "\n" + this.key), () => {
      this.save();
      claim();
    });
    addEventListener("pagehide", () => this.hide(true));
    // Another tab identified, reset or cleared storage: read the ids again.
    addEventListener("storage", (e) => {
      if (!e.key || e.key == ANON_KEY || e.key == USER_KEY) this.aid = this.uid = undefined;
    });
    addEventListener("pageshow", () => (this.hidden = false));
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState == "hidden") this.hide(false);
      else claim();
    });
  }

  /** track queues an event; it never throws and never waits. */
  track(e: TrackEvent): void {
    this.add(e && e.userId, e && e.anonymousId, e && e.eventType, e && e.payload, e && e.occurredAt);
  }

  /** identify sends a context_identified event with traits as payload, carrying the user id and
   * the anonymous id, which links the two. In a browser the user id is remembered (persisted) for
   * later events; identifying another user than the remembered one starts a new anonymous id
   * first, so one anonymous id never names two users. */
  identify(o: { userId: string; anonymousId?: string; traits?: Record<string, unknown> }): void {
    const id = o && o.userId;
    if (!id || typeof id != "string") return this.fail("identify needs a userId", 1);
    if (this.browser && id != this.who()) {
      if (this.uid) this.renew();
      save(USER_KEY, (this.uid = id));
    }
    this.add(id, o.anonymousId, "context_identified", o.traits);
  }

  /** reset (logout, browsers): forgets the identified user and starts a new anonymous id. */
  reset(): void {
    if (!this.browser) return;
    save(USER_KEY, (this.uid = null));
    this.renew();
  }

  /** anonymousId is the visitor's anonymous id: in a browser a UUIDv7 made on first use and
   * persisted (localStorage and a first-party cookie); in Node getUser's, if any (never made up). */
  anonymousId(): string | undefined {
    if (!this.browser) return this.user().anonymousId;
    if (!this.aid) {
      const a = load(ANON_KEY);
      if (a && a.length < 256) this.aid = a;
      else this.renew();
    }
    return this.aid;
  }

  private renew(): void {
    save(ANON_KEY, (this.aid = uuidv7()));
  }

  /** who is the user id identify remembered (browsers). */
  private who(): string | undefined {
    if (this.uid === undefined) this.uid = load(USER_KEY);
    return this.uid || undefined;
  }

  /** trackPageView sends page_viewed (and ai_referral_session, once per page load, when the
   * visit came from a known AI assistant); a no-op outside a browser. */
  trackPageView(o: { userId?: string; path?: string } = {}): void {
    if (!this.browser) return;
    const user = o.userId;
    const href = location.href;
    const ref = document.referrer;
    this.add(user, 0, "page_viewed", { path: o.path || location.pathname, url: href, referrer: ref, title: document.title });
    const ai = referred ? null : aiReferral(href, ref);
    if (ai) {
      referred = true;
      this.add(user, 0, "ai_referral_session", ai as any);
    }
  }

  /** flush sends every queued event now; it resolves once they are delivered or dropped. */
  flush(): Promise<void> {
    const target = (this.forced = this.enq);
    this.pump();
    return this.done >= target ? Promise.resolve() : new Promise((r) => this.waiters.push([target, r]));
  }

  /** shutdown stops the timer, refuses further events and flushes the rest. */
  shutdown(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = 0;
    return this.flush();
  }

  /** add queues an event of user and anon; what the call leaves out comes from getUser (whose
   * anonymous id only for its own user), then in a browser from identify and the visitor's id. */
  private add(user: any, anon: any, type: unknown, payload?: unknown, at?: string | Date): void {
    if (this.closed) return this.fail("the client is shut down; event dropped", 1);
    if (this.getUser && !(user && anon)) {
      const c = this.user();
      if (!anon && (!user || !c.userId || c.userId == user)) anon = c.anonymousId;
      user = user || c.userId;
    }
    if (this.browser) {
      user = user || this.who();
      anon = anon || this.anonymousId();
    }
    if ((user && typeof user != "string") || (anon && typeof anon != "string") || !(user || anon)) {
      return this.fail("userId or anonymousId (a string) is required", 1);
    }
    if (typeof type != "string" || !EVENT_TYPE.test(type)) return this.fail(`eventType ${JSON.stringify(type)} is not snake_case`, 1);
    if (payload != null && (typeof payload != "object" || Array.isArray(payload))) return this.fail("payload must be an object", 1);
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
      return this.fail("event not serializable: " + (err as Error).message, 1);
    }
    if (s.length > MAX_EVENT_CHARS) return this.fail("event larger than 32 KiB", 1);
    this.q.push([now, s]);
    this.enq++;
    if (this.q.length > MAX_QUEUE) {
      this.q.shift();
      this.settle(1);
      this.fail("queue full: dropped the oldest event", 1);
    }
    if (!this.batch) this.forced = this.enq;
    // In a browser, have a session token ready before the page may be hidden: a beacon cannot wait
    // for a handshake.
    if (this.store && this.pk && !this.hs && !(this.tok && now < this.tok.r)) this.token().catch(() => {});
    this.pump();
    this.dirty();
  }

  /** pump starts requests while there is a full batch (or forced events) and a free slot. */
  private pump(): void {
    const slots = this.batch ? 1 : 8;
    while (this.active < slots && this.q.length && (this.q.length >= this.size || this.enq - this.q.length < this.forced)) {
      const chunk = this.take(this.batch ? MAX_EVENTS : 1);
      this.active++;
      this.inflight.add(chunk);
      const fin = () => {
        this.active--;
        this.inflight.delete(chunk);
        this.settle(chunk.length);
        this.pump();
        this.dirty();
      };
      this.send(chunk).then(fin, fin);
    }
    if (!this.q.length || this.closed) {
      clearTimeout(this.timer);
      this.timer = 0;
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = 0;
        this.flush();
      }, this.interval);
    }
  }

  private take(max: number): Stored[] {
    let n = 0;
    let chars = 0;
    while (n < this.q.length && n < max && (n == 0 || chars + this.q[n][1].length < MAX_REQUEST_CHARS)) chars += this.q[n++][1].length;
    return this.q.splice(0, n);
  }

  private settle(n: number): void {
    this.done += n;
    this.waiters = this.waiters.filter(([t, r]) => (this.done >= t ? (r(), false) : true));
  }

  /** send delivers one chunk: retries with backoff, a new session token on 401 (once). It never
   * rejects: what cannot be delivered is reported to onError. */
  private async send(chunk: Stored[]): Promise<void> {
    let renewed = false;
    for (let attempt = 0; ; ) {
      let a: Answer | null = null;
      let err = "network error";
      try {
        const tok = this.pk ? await this.token() : "";
        a = await this.post(BATCH_PATH, tok ? "Bearer " + tok : "ApiKey " + this.key, this.body(chunk));
      } catch (e: any) {
        if (e && e.s) a = e;
        else err += ": " + (e && e.message);
      }
      if (a && a.s >= 200 && a.s < 300) {
        const rej = (a.b && a.b.errors) || [];
        if (rej.length) {
          this.fail(
            `${rej.length} of ${chunk.length} events rejected: ` + rej.slice(0, 5).map((x: any) => `events[${x.index}] ${x.code}: ${x.message}`).join("; "),
            rej.length, a.s, rej[0].code);
        }
        return;
      }
      if (a && a.s == 401 && this.pk && !renewed) {
        renewed = true;
        this.tok = null;
        continue;
      }
      const s = a ? a.s : 0;
      if ((s && s != 408 && s != 429 && s < 500) || attempt >= this.retries) {
        const d = a && a.b && a.b.error;
        const msg = d ? `${s} ${d.code}: ${d.message}` : s ? "HTTP " + s : err;
        return this.fail(`${chunk.length} events not delivered: ${msg}`, chunk.length, s || undefined, d && d.code);
      }
      await sleep(this.backoff(attempt++, a && a.h));
    }
  }

  /** backoff is Retry-After when the server sent one, else exponential with jitter. */
  private backoff(attempt: number, retryAfter: string | null | undefined): number {
    if (retryAfter) {
      const ms = /^\s*\d+\s*$/.test(retryAfter) ? +retryAfter * 1000 : Date.parse(retryAfter) - Date.now();
      if (ms >= 0) return Math.min(ms, MAX_RETRY_AFTER);
    }
    const d = Math.min(MAX_BACKOFF, this.base * 2 ** attempt);
    return d / 2 + (Math.random() * d) / 2;
  }

  /** body is a batch request: each event stamped with this request's sent_at, so the server can
   * correct the client's clock; beacons carry the session token first, as the server reads it. */
  private body(chunk: Stored[], token?: string): string {
    const head = `{"sent_at":"${new Date().toISOString()}",`;
    let out = token ? `{"session_token":${JSON.stringify(token)},"events":[` : `{"events":[`;
    for (let i = 0; i < chunk.length; i++) out += (i ? "," : "") + head + chunk[i][1].slice(1);
    return out + "]}";
  }

  private async post(path: string, auth: string, body: string): Promise<Answer> {
    const AS: any = typeof AbortSignal != "undefined" ? AbortSignal : null;
    const res = await fetch(this.url + path, {
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

  private user(): UserContext {
    try {
      return (this.getUser && this.getUser()) || {};
    } catch (e) {
      this.fail("getUser failed: " + (e as Error).message, 0);
      return {};
    }
  }

  /** token is the cached session token for the current user, refreshed before it expires; one
   * handshake at a time. A failed handshake throws its Answer. */
  private token(): Promise<string> {
    const u = this.user();
    const anon = u.anonymousId || (this.browser ? this.anonymousId() : undefined);
    const k = u.userId + "\n" + anon;
    const t = this.tok;
    if (t && t.k == k && Date.now() < t.r) return Promise.resolve(t.t);
    if (!this.hs) {
      this.hs = this.post("/api/auth/session/", "ApiKey " + this.key, JSON.stringify({
        user_id: u.userId,
        anonymous_id: anon,
        user_id_sig: u.userIdSig,
        user_id_ts: u.userIdTs,
      })).then((a) => {
        const b = a.b || {};
        if (a.s < 200 || a.s > 299 || typeof b.token != "string") throw a.s < 300 ? { ...a, s: 502 } : a;
        const now = Date.now();
        const life = b.expires_in > 0 ? b.expires_in * 1000 : Date.parse(b.expires_at) - now || 0;
        this.tok = { t: b.token, k, e: now + life, r: now + life - Math.min(60000, life / 5) };
        return b.token;
      });
      const clear = () => (this.hs = null);
      this.hs.then(clear, clear);
    }
    return this.hs;
  }

  /** hide sends the queue with keepalive requests (or sendBeacon) that outlive the page, within
   * the 64 KiB budget; what does not fit, or cannot be sent now, stays stored for the next load. */
  private hide(closing: boolean): void {
    if (closing) this.hidden = true;
    const t = this.tok;
    const token = this.pk ? (t && Date.now() < t.e - 5000 ? t.t : "") : "";
    if (navigator.onLine !== false && (token || !this.pk)) {
      const enc = new TextEncoder();
      // The budget is shared by every keepalive request in flight, including earlier hides'.
      let budget = KEEPALIVE_BUDGET - this.ka;
      while (this.q.length) {
        let size = 40 + token.length;
        let n = 0;
        for (; n < this.q.length && n < MAX_EVENTS; n++) {
          const len = enc.encode(this.q[n][1]).length + 40;
          if (size + len > budget) break;
          size += len;
        }
        if (!n) break;
        const chunk = this.q.splice(0, n);
        if (!this.beacon(chunk, token, size)) {
          this.q.unshift(...chunk);
          break;
        }
        budget -= size;
        this.settle(n);
      }
    }
    clearTimeout(this.saving);
    this.saving = 0;
    this.save();
  }

  private beacon(chunk: Stored[], token: string, size: number): boolean {
    const url = this.url + BATCH_PATH;
    const body = this.body(chunk, token);
    if (typeof Request != "undefined" && "keepalive" in Request.prototype) {
      const again = () => {
        // Still alive and the server did not take them: back to the queue (same message ids),
        // sent the normal way (which renews an expired token).
        this.q.unshift(...chunk);
        this.enq += chunk.length;
        this.forced = this.enq;
        // A closing page keeps them stored for the next load instead.
        if (!this.hidden) this.pump();
        this.save();
      };
      this.ka += size;
      fetch(url, {
        method: "POST",
        keepalive: true,
        // text/plain with the token in the body is a simple request: no preflight before unload.
        headers: token ? { "Content-Type": "text/plain" } : { Authorization: "ApiKey " + this.key, "Content-Type": "application/json" },
        body,
      }).then((r) => {
        this.ka -= size;
        const s = r.status;
        if (s == 401 || s == 408 || s == 429 || s >= 500) again();
        else if (s >= 400) this.fail(`${chunk.length} events not delivered: HTTP ${s}`, chunk.length, s);
      }, () => {
        this.ka -= size;
        again();
      });
      return true;
    }
    return !!token && navigator.sendBeacon(url, body);
  }

  /** restore queues events another (closed) tab left stored, and sends them now. */
  private restore(ev: Stored[]): void {
    this.q.unshift(...ev);
    this.enq += ev.length;
    this.forced = this.enq;
    this.pump();
    this.save();
  }

  private dirty(): void {
    if (this.store && !this.saving) {
      this.saving = setTimeout(() => {
        this.saving = 0;
        this.save();
      }, 0);
    }
  }

  /** save stores every event not yet confirmed: those in requests, then the queue. */
  private save(): void {
    if (!this.store) return;
    const all: Stored[] = [];
    this.inflight.forEach((c) => all.push(...c));
    this.store.save(all.concat(this.q), this.hidden);
  }

  private fail(msg: string, events: number, status?: number, code?: string): void {
    const e = new Error("Cohort: " + msg) as CohortError;
    e.events = events;
    if (status) e.status = status;
    if (code) e.code = code;
    try {
      this.onError(e);
    } catch {
      // the handler's own failure must not break tracking
    }
  }
}
