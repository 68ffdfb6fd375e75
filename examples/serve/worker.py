"""A delivery worker in Python (3.9+, standard library only) that shares its
fleet's circuits through "kvbreaker serve": it asks before each delivery,
waits when held, and reports what each delivery said about its host.

    KVBREAKER_TOKEN=... python3 worker.py http://127.0.0.1:8420 https://hooks.example/inbox 10

Each decision is printed as one JSON line, for a reader (or a test).
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request

serve, target = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 1
name = sys.argv[4] if len(sys.argv) > 4 else "python"
token = os.environ["KVBREAKER_TOKEN"]


def api(path, body):
    req = urllib.request.Request(
        serve + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + token},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return json.load(res)
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{path}: {e.code} {json.load(e).get('detail')}") from None


def outcome(status):
    """What a delivery's result says about its host."""
    if 200 <= status < 300:
        return "success"
    if 400 <= status < 500 and status not in (408, 429):
        return "reachable-failure"
    return "failure"


def deliver(message):
    held_since = None
    while True:
        delivery = {"host": target}
        if held_since:
            delivery["held_since"] = held_since
        v = api("/v1/decide", {"deliveries": [delivery]})["verdicts"][0]
        print(json.dumps({"worker": name, "message": message, "decision": v["decision"],
                          "retry_at": v["retry_at"], "error": v["error"]}), flush=True)
        if v["decision"] == "drop":
            return
        if v["decision"] == "hold":
            held_since = v["held_since"]
            time.sleep(v["retry_in_ms"] / 1000)
            continue
        try:
            req = urllib.request.Request(target, data=f"{name} message {message}".encode(), method="POST")
            with urllib.request.urlopen(req, timeout=10) as res:
                status = res.status
        except urllib.error.HTTPError as e:
            status = e.code
        except OSError:
            status = 0  # no answer: a failure
        o = outcome(status)
        report = {"host": target, "outcome": o}
        if v["probe_id"]:
            report["probe_id"] = v["probe_id"]
        api("/v1/outcomes", {"outcomes": [report]})
        if o != "failure":
            return
        held_since = None  # a failed delivery is retried: ask again


for i in range(count):
    deliver(i)
