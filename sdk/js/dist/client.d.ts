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
export declare class Client {
    private _url;
    private _key;
    private _pk;
    private _size;
    private _interval;
    private _batch;
    private _retries;
    private _base;
    private _getUser?;
    private _onError;
    private _q;
    private _inflight;
    private _active;
    private _enq;
    private _done;
    private _forced;
    private _waiters;
    private _timer;
    private _saving;
    private _closed;
    private _hidden;
    private _ka;
    private _tok;
    private _hs;
    private _browser;
    private _store;
    private _aid?;
    private _uid?;
    constructor(o: ClientOptions);
    /** track queues an event; it never throws and never waits. */
    track(e: TrackEvent): void;
    /** identify sends a context_identified event with traits as payload, carrying the user id and
     * the anonymous id, which links the two. In a browser the user id is remembered (persisted) for
     * later events; identifying another user than the remembered one starts a new anonymous id
     * first, so one anonymous id never names two users. */
    identify(o: {
        userId: string;
        anonymousId?: string;
        traits?: Record<string, unknown>;
    }): void;
    /** reset (logout, browsers): forgets the identified user and starts a new anonymous id. */
    reset(): void;
    /** anonymousId is the visitor's anonymous id: in a browser a UUIDv7 made on first use and
     * persisted (localStorage and a first-party cookie); in Node getUser's, if any (never made up). */
    anonymousId(): string | undefined;
    private _renew;
    /** who is the user id identify remembered (browsers). */
    private _who;
    /** trackPageView sends page_viewed (and ai_referral_session, once per page load, when the
     * visit came from a known AI assistant); a no-op outside a browser. */
    trackPageView(o?: {
        userId?: string;
        path?: string;
    }): void;
    /** flush sends every queued event now; it resolves once they are delivered or dropped. */
    flush(): Promise<void>;
    /** shutdown stops the timer, refuses further events and flushes the rest. */
    shutdown(): Promise<void>;
    /** add queues an event of user and anon; what the call leaves out comes from getUser (whose
     * anonymous id only for its own user), then in a browser from identify and the visitor's id. */
    private _add;
    /** pump starts requests while there is a full batch (or forced events) and a free slot. */
    private _pump;
    private _take;
    private _settle;
    /** send delivers one chunk: retries with backoff, a new session token on 401 (once). It never
     * rejects: what cannot be delivered is reported to onError. */
    private _send;
    /** backoff is Retry-After when the server sent one, else exponential with jitter. */
    private _backoff;
    /** body is a batch request: each event stamped with this request's sent_at, so the server can
     * correct the client's clock; beacons carry the session token first, as the server reads it. */
    private _body;
    private _post;
    private _user;
    /** token is the cached session token for the current user, refreshed before it expires; one
     * handshake at a time. A failed handshake throws its Answer. */
    private _token;
    /** hide sends the queue with keepalive requests (or sendBeacon) that outlive the page, within
     * the 64 KiB budget; what does not fit, or cannot be sent now, stays stored for the next load. */
    private _hide;
    private _beacon;
    /** restore queues events another (closed) tab left stored, and sends them now. */
    private _restore;
    private _dirty;
    /** save stores every event not yet confirmed: those in requests, then the queue. */
    private _save;
    private _fail;
}
