export declare const ANON_KEY = "cohort_anonymous_id";
export declare const USER_KEY = "cohort_user_id";
/** load reads k (localStorage, then the cookie) and writes it back to both: null when absent. */
export declare function load(k: string): string | null;
/** save writes k to localStorage and the cookie; null removes it from both. */
export declare function save(k: string, v: string | null): void;
