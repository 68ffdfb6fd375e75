// The Workers KV subset of Cloudflare's v4 REST API, served by a Worker over
// a real Miniflare KV binding, so expiry rules (60 s minimum TTL, whole-second
// expiry, 512-byte keys, 1024-byte metadata) come from Cloudflare's own
// simulator rather than from us.
//
// Routes (under /client/v4, as cloudflare-go v6's kv package calls them):
//
//	GET    /accounts/:a/storage/kv/namespaces/:n/values/:key    raw value; "expiration" header
//	PUT    /accounts/:a/storage/kv/namespaces/:n/values/:key    multipart (value, metadata) or raw body;
//	                                                            ?expiration= or ?expiration_ttl=
//	DELETE /accounts/:a/storage/kv/namespaces/:n/values/:key
//	GET    /accounts/:a/storage/kv/namespaces/:n/metadata/:key
//	GET    /accounts/:a/storage/kv/namespaces/:n/keys           ?prefix= &limit= &cursor=
//
// Test controls (not part of Cloudflare's API), under /__kvbreaker/:
//
//	POST /__kvbreaker/advance?ms=N     move the KV clock N ms forward; answers {"now_ms": ...}
//	GET  /__kvbreaker/clock            {"now_ms": ...}: the KV clock, frozen between advances
//	POST /__kvbreaker/throttle?count=N&retry_after=S
//	                                   answer the next N API requests with 429 and Retry-After: S
//	GET  /__kvbreaker/stats            request counts by method, and the 429s sent
//	POST /__kvbreaker/reset-stats
//
// With WRITE_LIMIT = "1", a second write (PUT or DELETE) to one key within a
// second gets 429 with Retry-After: 1, as Cloudflare limits writes per key.

const API = "/client/v4/accounts/";

// Cloudflare error codes used in the error envelopes (values as the real API
// documents them where known; the fixture only needs them to be stable).
const CODE_NOT_FOUND = 10009;
const CODE_BAD_REQUEST = 10001;
const CODE_AUTH = 10000;
const CODE_RATE_LIMITED = 10049;
const CODE_NO_NAMESPACE = 10013;

let throttle = { count: 0, retryAfter: 1 };
let stats = { GET: 0, PUT: 0, DELETE: 0, throttled: 0, rateLimited: 0 };
const lastWrite = new Map(); // key -> ms of the last accepted write (real time)

function envelope(status, result, errors = [], extra = {}, headers = {}) {
  return Response.json(
    { success: errors.length === 0, errors, messages: [], result, ...extra },
    { status, headers },
  );
}

function fail(status, code, message, headers = {}) {
  return envelope(status, null, [{ code, message }], {}, headers);
}

async function control(request, env, url) {
  const op = url.pathname.slice("/__kvbreaker/".length);
  switch (`${request.method} ${op}`) {
    case "POST advance":
    case "GET clock": {
      // The clock lives in the launcher (the CONTROL service), which pins
      // Miniflare's KV timers to it.
      const res = await env.CONTROL.fetch(`http://control/${op}${url.search}`, { method: request.method });
      return new Response(res.body, { status: res.status, headers: { "content-type": "application/json" } });
    }
    case "POST throttle":
      throttle = {
        count: Number(url.searchParams.get("count") ?? "1"),
        retryAfter: url.searchParams.get("retry_after") ?? "1",
      };
      return Response.json(throttle);
    case "GET stats":
      return Response.json(stats);
    case "POST reset-stats":
      stats = { GET: 0, PUT: 0, DELETE: 0, throttled: 0, rateLimited: 0 };
      lastWrite.clear();
      return Response.json(stats);
  }
  return fail(404, CODE_NOT_FOUND, `no control ${request.method} ${op}`);
}

// rawKey returns the key named by the path after prefix, decoded. The raw
// (still percent-encoded) path is used, so an escaped "/" stays in the key.
function rawKey(rawPath, prefix) {
  const enc = rawPath.slice(prefix.length);
  if (enc === "") return { error: "missing key name" };
  try {
    return { key: decodeURIComponent(enc) };
  } catch {
    return { error: "could not URL-decode key name" };
  }
}

// rawPathOf returns the request path exactly as sent (WHATWG URL parsing
// would resolve "." and ".." segments, which Cloudflare's API does not).
function rawPathOf(request) {
  const u = request.url;
  const start = u.indexOf("/", u.indexOf("//") + 2);
  let end = u.indexOf("?", start);
  if (end < 0) end = u.length;
  return u.slice(start, end);
}

async function parsePut(request) {
  const type = request.headers.get("content-type") ?? "";
  if (type.startsWith("multipart/form-data")) {
    const form = await request.formData();
    const value = form.get("value");
    if (value === null) return { error: "multipart body has no 'value' field" };
    let metadata;
    const rawMeta = form.get("metadata");
    if (rawMeta !== null) {
      const text = typeof rawMeta === "string" ? rawMeta : await rawMeta.text();
      try {
        metadata = JSON.parse(text);
      } catch {
        return { error: `metadata is not valid JSON: ${text.slice(0, 64)}` };
      }
    }
    return { value: typeof value === "string" ? value : await value.arrayBuffer(), metadata };
  }
  return { value: await request.arrayBuffer() };
}

async function api(request, env, url) {
  const auth = request.headers.get("authorization") ?? "";
  if (env.API_TOKEN && auth !== `Bearer ${env.API_TOKEN}`) {
    return fail(403, CODE_AUTH, "Authentication error");
  }
  const path = rawPathOf(request);
  const m = /^\/client\/v4\/accounts\/([^/]+)\/storage\/kv\/namespaces\/([^/]+)\/(values\/|metadata\/|keys$)/.exec(path);
  if (!m) return fail(404, CODE_NOT_FOUND, `no route for ${request.method} ${path}`);
  const [prefix, account, namespace, kind] = m;
  if (account !== env.ACCOUNT_ID || namespace !== env.NAMESPACE_ID) {
    return fail(404, CODE_NO_NAMESPACE, "namespace not found");
  }
  if (request.method in stats) stats[request.method]++;
  if (throttle.count > 0) {
    throttle.count--;
    stats.throttled++;
    return fail(429, CODE_RATE_LIMITED, "Too many requests (fixture throttle)", { "Retry-After": throttle.retryAfter });
  }

  if (kind === "keys") {
    if (request.method !== "GET") return fail(405, CODE_BAD_REQUEST, "method not allowed");
    const limit = Number(url.searchParams.get("limit") ?? "1000");
    const res = await env.KV.list({
      prefix: url.searchParams.get("prefix") ?? undefined,
      limit,
      cursor: url.searchParams.get("cursor") || undefined,
    });
    const keys = res.keys.map((k) => ({ name: k.name, expiration: k.expiration, metadata: k.metadata }));
    return envelope(200, keys, [], {
      result_info: { count: keys.length, cursor: res.list_complete ? "" : res.cursor },
    });
  }

  const k = rawKey(path, prefix);
  if (k.error) return fail(400, CODE_BAD_REQUEST, k.error);
  const key = k.key;

  if (kind === "metadata/") {
    if (request.method !== "GET") return fail(405, CODE_BAD_REQUEST, "method not allowed");
    const got = await env.KV.getWithMetadata(key);
    if (got.value === null) return fail(404, CODE_NOT_FOUND, "metadata: 'key not found'");
    return envelope(200, got.metadata);
  }

  switch (request.method) {
    case "GET": {
      const got = await env.KV.getWithMetadata(key, { type: "arrayBuffer" });
      if (got.value === null) return fail(404, CODE_NOT_FOUND, "get: 'key not found'");
      return new Response(got.value, { headers: { "content-type": "application/octet-stream" } });
    }
    case "PUT":
    case "DELETE": {
      if (env.WRITE_LIMIT === "1") {
        const now = Date.now();
        const last = lastWrite.get(key);
        if (last !== undefined && now - last < 1000) {
          stats.rateLimited++;
          return fail(429, CODE_RATE_LIMITED, "KV PUT failed: 429 Too Many Requests (one write per second per key)", {
            "Retry-After": "1",
          });
        }
        lastWrite.set(key, now);
      }
      if (request.method === "DELETE") {
        await env.KV.delete(key);
        return envelope(200, {});
      }
      const body = await parsePut(request);
      if (body.error) return fail(400, CODE_BAD_REQUEST, body.error);
      const opts = {};
      const exp = url.searchParams.get("expiration");
      const ttl = url.searchParams.get("expiration_ttl");
      if (ttl !== null) opts.expirationTtl = Number(ttl);
      else if (exp !== null) opts.expiration = Number(exp);
      if (body.metadata !== undefined) opts.metadata = body.metadata;
      try {
        await env.KV.put(key, body.value, opts);
      } catch (e) {
        return fail(400, CODE_BAD_REQUEST, String(e?.message ?? e));
      }
      return envelope(200, {});
    }
  }
  return fail(405, CODE_BAD_REQUEST, "method not allowed");
}

// stamp adds the Date header Cloudflare's edge puts on every API answer (the
// real clock, to the second), which cloudflarekv's SampleClock reads;
// Miniflare sends none of its own.
function stamp(res) {
  const out = new Response(res.body, res);
  out.headers.set("date", new Date().toUTCString());
  return out;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    try {
      if (url.pathname.startsWith("/__kvbreaker/")) return await control(request, env, url);
      if (url.pathname === "/__kvbreaker") return Response.json({ ready: true });
      if (url.pathname.startsWith(API)) return stamp(await api(request, env, url));
      return fail(404, CODE_NOT_FOUND, `no route for ${request.method} ${url.pathname}`);
    } catch (e) {
      return fail(500, 10002, `fixture error: ${e?.stack ?? e}`);
    }
  },
};
