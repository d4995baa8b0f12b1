export interface AIReferral {
    source_provider: string;
    query_hint: string | null;
    landing_url: string;
    referrer_url: string;
}
/** aiReferral tells whether a landing on landingUrl, coming from referrerUrl, came from a known AI
 * assistant: the referrer's host first, then the landing URL's utm_source. null when neither. */
export declare function aiReferral(landingUrl: string, referrerUrl: string): AIReferral | null;
