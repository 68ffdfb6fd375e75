// Drives fedify's own CircuitBreaker on call streams read as JSON from
// stdin and prints its answers as JSON, for TestAgainstFedify.
//
// Usage: node driver.mjs <path of fedify's dist/circuit-breaker-*.mjs>
// Input:  [{options: {failureThreshold, failureWindowMs, recoveryDelayMs,
//           releaseIntervalMs, heldActivityTtlMs, stateTtlMs?},
//           calls: [{op: "allow"|"failure"|"success", host, at, heldSince?}]}]
//         (instants in ms since the Unix epoch)
// Output: one array per stream of {decision, retryAt?, from?, to?}.
//
// The KV store keeps records in a Map with their TTL on the same fake
// clock (expired when now >= write + ttl, like the Go models' store). It
// has no cas, so the breaker writes with set/delete and runs no legacy
// sweep; the calls are sequential, so compare-and-swap would change nothing.
import { pathToFileURL } from "node:url";
import { Temporal } from "@js-temporal/polyfill";

const chunk = process.argv[2];
const mod = await import(pathToFileURL(chunk).href);
const CircuitBreaker = Object.values(mod).find((v) => typeof v === "function" && v.prototype?.beforeSend);
if (CircuitBreaker == null) throw new Error(`no CircuitBreaker class exported by ${chunk}`);

let input = "";
for await (const c of process.stdin) input += c;
const streams = JSON.parse(input);

const out = [];
for (const s of streams) {
  let now = Temporal.Instant.fromEpochMilliseconds(0);
  const m = new Map();
  const kv = {
    async get(k) {
      const key = JSON.stringify(k);
      const e = m.get(key);
      if (e == null) return undefined;
      if (e.exp != null && Temporal.Instant.compare(now, e.exp) >= 0) {
        m.delete(key);
        return undefined;
      }
      return structuredClone(e.v);
    },
    async set(k, v, o) {
      m.set(JSON.stringify(k), { v: structuredClone(v), exp: o?.ttl == null ? undefined : now.add(o.ttl) });
    },
    async delete(k) {
      m.delete(JSON.stringify(k));
    },
    async *list() {},
  };
  const o = s.options;
  let change;
  const options = {
    failureThreshold: o.failureThreshold,
    failureWindow: { milliseconds: o.failureWindowMs },
    recoveryDelay: { milliseconds: o.recoveryDelayMs },
    releaseInterval: { milliseconds: o.releaseIntervalMs },
    heldActivityTtl: { milliseconds: o.heldActivityTtlMs },
    onStateChange: (_host, from, to) => { change = { from, to }; },
  };
  if (o.stateTtlMs != null) options.stateTtl = { milliseconds: o.stateTtlMs };
  const cb = new CircuitBreaker({ kv, prefix: ["cb"], now: () => now, options });
  const res = [];
  for (const c of s.calls) {
    now = Temporal.Instant.fromEpochMilliseconds(c.at);
    change = undefined;
    const r = {};
    if (c.op === "allow") {
      const msg = c.heldSince == null ? {} : { circuitHeldSince: Temporal.Instant.fromEpochMilliseconds(c.heldSince).toString() };
      const d = await cb.beforeSend(c.host, msg);
      if (d.type === "send") r.decision = d.probe ? "probe" : "send";
      else if (d.type === "hold") {
        r.decision = "hold";
        r.retryAt = now.add(d.delay).epochMilliseconds;
      } else r.decision = d.type;
    } else if (c.op === "failure") await cb.recordFailure(c.host);
    else await cb.recordSuccess(c.host);
    if (change != null) Object.assign(r, change);
    res.push(r);
  }
  out.push(res);
}
process.stdout.write(JSON.stringify(out));
