// Starts worker.js under Miniflare on 127.0.0.1 with a random port and prints
// one JSON line {"url": ...} on stdout when it is ready. It exits when stdin
// closes (the Go test process died or stopped it) or on SIGTERM/SIGINT.
//
// Configuration (environment):
//
//	KVB_ACCOUNT_ID, KVB_NAMESPACE_ID  the IDs the REST routes accept
//	KVB_API_TOKEN                     the bearer token required (empty: none)
//	KVB_WRITE_LIMIT                   "1" to answer a second write to one key within 1 s with 429
//
// Time control: the Worker's CONTROL service binding is this process. It pins
// Miniflare's KV clock with the same internal control operation Miniflare's
// own tests use (enableFakeTimers on the KV namespace's Durable Object): the
// clock starts at the real time of launch and moves only by /advance. A
// heartbeat re-pins it every second, which also keeps the Durable Object
// from being evicted (a new instance would start on real time).

import { Miniflare, _enableControlEndpoints } from "miniflare";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const account = process.env.KVB_ACCOUNT_ID || "kvbreaker-account";
const namespace = process.env.KVB_NAMESPACE_ID || "kvbreaker-namespace";

_enableControlEndpoints();

let kvObject; // the KV namespace's Durable Object stub, resolved lazily
let nowMs = Date.now(); // the KV clock, frozen between advances

async function controlOp(name, ...args) {
  if (kvObject === undefined) {
    const ns = await mf._getInternalDurableObjectNamespace("kv", "kv:ns", "KVNamespaceObject");
    kvObject = ns.get(ns.idFromName(namespace));
  }
  const res = await kvObject.fetch("http://placeholder/", {
    cf: { miniflare: { controlOp: { name, args } } },
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`control ${name}: ${res.status} ${text}`);
  return text;
}

// pin sets the KV clock to nowMs. Calls run one at a time, each reading nowMs
// when it runs, so a heartbeat can never land an older instant after an
// advance.
let chain = Promise.resolve();
function pin() {
  const p = chain.then(() => controlOp("enableFakeTimers", nowMs));
  chain = p.catch(() => {});
  return p;
}

const mf = new Miniflare({
  host: "127.0.0.1",
  port: 0,
  modules: true,
  scriptPath: path.join(here, "worker.js"),
  compatibilityDate: "2025-01-01",
  kvNamespaces: { KV: namespace },
  bindings: {
    ACCOUNT_ID: account,
    NAMESPACE_ID: namespace,
    API_TOKEN: process.env.KVB_API_TOKEN || "",
    WRITE_LIMIT: process.env.KVB_WRITE_LIMIT || "",
  },
  serviceBindings: {
    async CONTROL(request) {
      const url = new URL(request.url);
      try {
        if (url.pathname === "/advance") {
          const ms = Number(url.searchParams.get("ms"));
          if (!Number.isInteger(ms) || ms < 0) return new Response("ms must be a non-negative integer", { status: 400 });
          nowMs += ms;
          await pin();
          return Response.json({ now_ms: nowMs });
        }
        if (url.pathname === "/clock") return Response.json({ now_ms: nowMs });
        return new Response(`no control ${url.pathname}`, { status: 404 });
      } catch (e) {
        return new Response(String(e?.stack ?? e), { status: 500 });
      }
    },
  },
});

let stopping = false;
async function stop(code) {
  if (stopping) return;
  stopping = true;
  try {
    await mf.dispose();
  } finally {
    process.exit(code);
  }
}
process.on("SIGTERM", () => stop(0));
process.on("SIGINT", () => stop(0));
process.stdin.on("end", () => stop(0));
process.stdin.on("error", () => stop(0));
process.stdin.resume();

try {
  const url = await mf.ready;
  await pin();
  const heartbeat = setInterval(() => {
    pin().catch((e) => process.stderr.write(`heartbeat: ${e}\n`));
  }, 1000);
  heartbeat.unref();
  process.stdout.write(JSON.stringify({ url: url.href.replace(/\/$/, ""), account, namespace, now_ms: nowMs }) + "\n");
} catch (e) {
  process.stderr.write(`miniflare failed to start: ${e?.stack ?? e}\n`);
  await stop(1);
}
