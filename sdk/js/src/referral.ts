// AI assistant referrals: which assistant a visit came from, read from document.referrer's host
// or from utm_source, for the ai_referral_session event.

/** Hosts of the known assistants (subdomains included) and the provider name each maps to. */
const HOSTS: [string, string][] = [
  ["chatgpt.com", "chatgpt"],
  ["chat.openai.com", "chatgpt"],
  ["perplexity.ai", "perplexity"],
  ["claude.ai", "claude"],
  ["gemini.google.com", "gemini"],
  ["copilot.microsoft.com", "copilot"],
];

/** Words that name a provider in utm_source (utm_source=chatgpt.com, perplexity, claude.ai, ...). */
const UTM: [RegExp, string][] = [
  [/chatgpt|openai/, "chatgpt"],
  [/perplexity/, "perplexity"],
  [/claude/, "claude"],
  [/gemini/, "gemini"],
  [/copilot/, "copilot"],
];

/** Query parameters in which an assistant may pass the user's question. */
const QUERY_PARAMS = ["q", "query", "prompt"];

export interface AIReferral {
  source_provider: string;
  query_hint: string | null;
  landing_url: string;
  referrer_url: string;
}

function parse(u: string): URL | null {
  try {
    return u ? new URL(u) : null;
  } catch {
    return null;
  }
}

function hostProvider(host: string): string | null {
  host = host.toLowerCase().replace(/\.$/, "");
  for (const [h, name] of HOSTS) if (host === h || host.endsWith("." + h)) return name;
  return null;
}

/** aiReferral tells whether a landing on landingUrl, coming from referrerUrl, came from a known AI
 * assistant: the referrer's host first, then the landing URL's utm_source. null when neither. */
export function aiReferral(landingUrl: string, referrerUrl: string): AIReferral | null {
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
  let hint: string | null = null;
  for (const src of [ref, landing]) {
    for (const k of QUERY_PARAMS) if (!hint && src) hint = src.searchParams.get(k) || null;
  }
  if (!hint && landing) hint = landing.searchParams.get("utm_term") || null;
  return { source_provider: provider, query_hint: hint, landing_url: landingUrl, referrer_url: referrerUrl };
}
