/** Caps of what one tab keeps stored: newest events first. */
export declare const MAX_STORED_EVENTS = 1000;
export declare const MAX_STORED_CHARS: number;
/** Stored events older than this are dropped rather than sent. */
export declare const MAX_AGE_MS: number;
/** A stored event: the time it was queued and its JSON. */
export type Stored = [number, string];
export declare function ls(): Storage | null;
export declare class Store {
    private _onOwned;
    readonly _key: string;
    private _owned;
    private _ns;
    /** ns names the destination (API URL and key): only events for it are claimed. onOwned runs once
     * the tab owns its key, when writing is allowed. */
    constructor(ns: string, _onOwned: () => void);
    private _own;
    /** save replaces this tab's stored events, keeping the newest within the caps; closed marks the
     * tab as gone (pagehide). */
    _save(events: Stored[], closed?: boolean): void;
    /** claim takes the stored events of tabs that are gone and hands them to take. */
    _claim(take: (events: Stored[]) => void): void;
}
