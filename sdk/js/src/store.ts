// Durable browser queue: the events a tab has not yet had confirmed are mirrored to localStorage
// under a key the tab owns, so that they survive the tab being closed, crashing or going offline,
// and the next page load (in any tab) sends them.
//
// Ownership: a tab holds a Web Lock named after its key for its whole life. A key whose lock is
// not held belongs to a tab that is gone; a page claims such keys inside one origin-wide lock, so
// two tabs never claim the same key, and removes the key as it takes the events: stored events
// are sent by exactly one tab. Where Web Locks are missing, a key is claimed once its tab marked
// it closed on pagehide or stopped refreshing it for STALE_MS.

const PREFIX = "cohort_q_";
/** Caps of what one tab keeps stored: newest events first. */
export const MAX_STORED_EVENTS = 1000;
export const MAX_STORED_CHARS = 1 << 20;
/** Stored events older than this are dropped rather than sent. */
export const MAX_AGE_MS = 7 * 24 * 3600 * 1000;
const STALE_MS = 10 * 60 * 1000;

/** A stored event: the time it was queued and its JSON. */
export type Stored = [number, string];

interface Doc {
  h: number; // last write
  c?: number; // closed (pagehide), for browsers without Web Locks
  e: Stored[];
}

export function ls(): Storage | null {
  try {
    return typeof localStorage != "undefined" ? localStorage : null;
  } catch {
    return null; // access denied (e.g. cookies blocked)
  }
}

function locks(): any {
  return typeof navigator != "undefined" && (navigator as any).locks;
}

export class Store {
  readonly _key: string;
  private _owned = false;
  private _ns: string;

  /** ns names the destination (API URL and key): only events for it are claimed. onOwned runs once
   * the tab owns its key, when writing is allowed. */
  constructor(ns: string, private _onOwned: () => void) {
    this._ns = PREFIX + ns + "_";
    this._key = this._ns + Math.random().toString(36).slice(2, 12);
    const l = locks();
    if (l) {
      l.request(this._key, () => {
        this._own();
        return new Promise(() => {});
      }).catch(() => {});
    } else this._own();
  }

  private _own() {
    this._owned = true;
    this._onOwned();
  }

  /** save replaces this tab's stored events, keeping the newest within the caps; closed marks the
   * tab as gone (pagehide). */
  _save(events: Stored[], closed?: boolean): void {
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
      const doc: Doc = { h: Date.now(), e: events.slice(i) };
      if (closed) doc.c = 1;
      s.setItem(this._key, JSON.stringify(doc));
    } catch {
      // quota exceeded or storage disabled: the events are still in memory
    }
  }

  /** claim takes the stored events of tabs that are gone and hands them to take. */
  _claim(take: (events: Stored[]) => void): void {
    const s = ls();
    if (!s) return;
    const l = locks();
    const run = (live: Set<string> | null) => {
      const out: Stored[] = [];
      const min = Date.now() - MAX_AGE_MS;
      const keys: string[] = [];
      for (let i = 0; i < s.length; i++) keys.push(s.key(i) || "");
      for (const k of keys) {
        if (k === this._key || k.indexOf(this._ns) !== 0) continue;
        try {
          const doc: Doc = JSON.parse(s.getItem(k) || "null");
          if (live ? live.has(k) : doc && !doc.c && doc.h > Date.now() - STALE_MS) continue;
          s.removeItem(k);
          for (const e of (doc && doc.e) || []) if (e[0] > min && typeof e[1] == "string") out.push(e);
        } catch {
          s.removeItem(k);
        }
      }
      if (out.length) take(out.sort((a, b) => a[0] - b[0]));
    };
    if (!l) return run(null);
    l.request(PREFIX + "claim", async () => {
      const q = await l.query();
      run(new Set((q.held || []).map((x: any) => x.name)));
    }).catch(() => {});
  }
}
