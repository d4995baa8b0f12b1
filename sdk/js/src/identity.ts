// A browser's visitor identity: the anonymous id (made on first use) and the user id given to
// identify, each kept in localStorage and in a first-party cookie. Reads take localStorage, then
// the cookie; writes go to both, so that they stay in sync and the subdomains of one site, which
// share the cookie but not localStorage, share the visitor.

import { ls } from "./store";

export const ANON_KEY = "cohort_anonymous_id";
export const USER_KEY = "cohort_user_id";
/** Seconds a cookie lives; every page load that reads it writes it again. */
const MAX_AGE = 31536000;

let domain: string | undefined;

/** cookieDomain is the widest domain the browser lets this page set a cookie on: the parent
 * domains of the host are tried from the top down (a public suffix such as co.uk is refused by
 * the browser); "" (a host-only cookie) for IP addresses and single-label hosts. */
function cookieDomain(): string {
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

/** load reads k (localStorage, then the cookie) and writes it back to both: null when absent. */
export function load(k: string): string | null {
  let v: string | null = null;
  try {
    v = ls()!.getItem(k);
  } catch {
    // no localStorage, or it throws (blocked, sandboxed): the cookie
  }
  try {
    v = v || decodeURIComponent((document.cookie.match("(?:^|; )" + k + "=([^;]+)") || [])[1] || "") || null;
  } catch {
    // cookies disabled too
  }
  if (v) save(k, v);
  return v;
}

/** save writes k to localStorage and the cookie; null removes it from both. */
export function save(k: string, v: string | null): void {
  try {
    const s = ls();
    if (s) v == null ? s.removeItem(k) : s.setItem(k, v);
  } catch {
    // quota exceeded or storage disabled: the cookie still holds it
  }
  try {
    const d = cookieDomain();
    document.cookie = k + "=" + encodeURIComponent(v || "") + ";path=/;max-age=" + (v == null ? 0 : MAX_AGE) +
      (d ? ";domain=" + d : "") + ";SameSite=Lax" + (location.protocol == "https:" ? ";Secure" : "");
  } catch {
    // cookies disabled (a sandboxed frame)
  }
}
