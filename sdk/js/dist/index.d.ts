export { Client } from "./client";
export type { ClientOptions, UserContext, TrackEvent, CohortError } from "./client";
export { uuidv7 } from "./uuid";
export { aiReferral } from "./referral";
export type { AIReferral } from "./referral";
