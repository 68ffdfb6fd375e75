// A delivery worker in Node (20+, no dependencies) that shares its fleet's
// circuits through "kvbreaker serve": it asks before each delivery, waits
// when held, and reports what each delivery said about its host.
//
//   KVBREAKER_TOKEN=... node worker.mjs http://127.0.0.1:8420 https://hooks.example/inbox 10
//
// Each decision is printed as one JSON line, for a reader (or a test).
const [serve, target, count = "1", name = "node"] = process.argv.slice(2);
const token = process.env.KVBREAKER_TOKEN;

async function api(path, body) {
  const res = await fetch(serve + path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${json.detail}`);
  return json;
}

// outcome is what a delivery's result says about its host.
function outcome(status) {
  if (status >= 200 && status < 300) return "success";
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) return "reachable-failure";
  return "failure";
}

async function deliver(message) {
  let heldSince;
  for (;;) {
    const delivery = { host: target };
    if (heldSince) delivery.held_since = heldSince;
    const { verdicts: [v] } = await api("/v1/decide", { deliveries: [delivery] });
    console.log(JSON.stringify({ worker: name, message, decision: v.decision, retry_at: v.retry_at, error: v.error }));
    if (v.decision === "drop") return;
    if (v.decision === "hold") {
      heldSince = v.held_since;
      await new Promise((r) => setTimeout(r, v.retry_in_ms));
      continue;
    }
    let status = 0;
    try {
      const res = await fetch(target, { method: "POST", body: `${name} message ${message}`, signal: AbortSignal.timeout(10_000) });
      status = res.status;
      await res.arrayBuffer();
    } catch {
      status = 0; // no answer: a failure
    }
    const o = outcome(status);
    const report = { host: target, outcome: o };
    if (v.probe_id) report.probe_id = v.probe_id;
    await api("/v1/outcomes", { outcomes: [report] });
    if (o !== "failure") return;
    heldSince = undefined; // a failed delivery is retried: ask again
  }
}

for (let i = 0; i < Number(count); i++) await deliver(i);
