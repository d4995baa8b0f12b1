// A mock Cohort API on 127.0.0.1 (node:http): it records every request and answers the session
// handshake and the batch endpoint as the Go server does, unless a test's handler answers first.
import http from "node:http";

export const BATCH = "/api/ingestion/track/batch/";
export const SESSION = "/api/auth/session/";

/**
 * startMock(handler?) -> {url, reqs, batches(), events(), sessions(), close()}.
 * handler(req, mock) may return {status, headers, body} (body: object or string), "destroy" to
 * kill the connection without an answer, or undefined for the default answer.
 */
export async function startMock(handler, opts = {}) {
  const reqs = [];
  const mock = {
    reqs,
    tokens: new Set(),
    expiresIn: 3600,
    batches: () => reqs.filter((r) => r.path === BATCH && r.method === "POST"),
    sessions: () => reqs.filter((r) => r.path === SESSION && r.method === "POST"),
    /** events of the batch requests that were answered 2xx (delivered) */
    events: () => mock.batches().filter((r) => r.status >= 200 && r.status < 300).flatMap((r) => (r.json && r.json.events) || []),
  };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8");
      let json = null;
      if (!opts.light) {
        try {
          json = JSON.parse(body);
        } catch {}
      }
      const r = { method: req.method, path: req.url, headers: req.headers, body, json, at: Date.now() };
      if (!opts.light || req.url !== BATCH) reqs.push(r);
      else mock.light = (mock.light || 0) + 1;
      if (opts.cors) {
        res.setHeader("Access-Control-Allow-Origin", req.headers.origin || "*");
        res.setHeader("Access-Control-Expose-Headers", "Retry-After");
        if (req.method === "OPTIONS") {
          res.setHeader("Access-Control-Allow-Methods", "POST, OPTIONS");
          res.setHeader("Access-Control-Allow-Headers", "Authorization, Content-Type");
          res.writeHead(204);
          return res.end();
        }
      }
      let out = handler ? await handler(r, mock) : undefined;
      if (out === "destroy") {
        r.status = 0;
        return req.socket.destroy();
      }
      if (out && out.raw) return out.raw(req, res);
      if (!out) out = defaultAnswer(r, mock);
      r.status = out.status;
      res.writeHead(out.status, { "Content-Type": "application/json", ...(out.headers || {}) });
      res.end(typeof out.body === "string" ? out.body : JSON.stringify(out.body ?? {}));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  mock.server = server;
  mock.port = server.address().port;
  mock.url = `http://127.0.0.1:${mock.port}`;
  mock.close = () =>
    new Promise((r) => {
      server.closeAllConnections();
      server.close(r);
    });
  return mock;
}

/** defaultAnswer: 201 session tokens for ApiKey pk_, 202 for batches with ApiKey sk_ or a known
 * session token (header or body), 401 otherwise. */
export function defaultAnswer(r, mock) {
  const auth = r.headers.authorization || "";
  if (r.path === SESSION) {
    if (!auth.startsWith("ApiKey pk_")) return { status: 401, body: { error: { code: "unauthenticated", message: "no" } } };
    const token = `tok-${mock.sessions().length}`;
    mock.tokens.add(token);
    return {
      status: 201,
      body: { token, token_type: "Bearer", expires_in: mock.expiresIn, expires_at: new Date(Date.now() + mock.expiresIn * 1000).toISOString() },
    };
  }
  if (r.path === BATCH) {
    const bodyToken = r.json && r.json.session_token;
    const ok = auth.startsWith("ApiKey sk_") || (auth.startsWith("Bearer ") && mock.tokens.has(auth.slice(7))) || (!auth && mock.tokens.has(bodyToken));
    if (!ok) return { status: 401, body: { error: { code: "unauthenticated", message: "token no longer valid" } } };
    const events = (r.json && r.json.events) || [];
    return { status: 202, body: { queued: events.length, skipped: 0, errors: [] } };
  }
  return { status: 404, body: { error: { code: "not_found", message: r.path } } };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** until polls cond every 10 ms for up to ms. */
export async function until(cond, ms = 3000, what = "condition") {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}
