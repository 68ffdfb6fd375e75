package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// jsonStyle lists where v, decoded JSON, breaks the commands' one JSON
// style: durations are numbers (or null) in fields whose name ends in
// "_ms"; no field carries a duration as text ("30m5s") or in seconds.
func jsonStyle(v any, path string) []string {
	var bad []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := path + "." + k
			switch {
			case strings.HasSuffix(k, "_seconds") || strings.HasSuffix(k, "_secs"):
				bad = append(bad, p+": seconds: use _ms")
			case strings.HasSuffix(k, "_ms"):
				if _, ok := e.(float64); !ok && e != nil {
					bad = append(bad, fmt.Sprintf("%s: %v (%T): want a number or null", p, e, e))
				}
			}
			bad = append(bad, jsonStyle(e, p)...)
		}
	case []any:
		for i, e := range x {
			bad = append(bad, jsonStyle(e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	case string:
		if _, err := time.ParseDuration(x); err == nil && x != "0" {
			bad = append(bad, fmt.Sprintf("%s: %q is a duration as text", path, x))
		}
		if first, _, ok := strings.Cut(x, " "); ok {
			if _, err := time.ParseDuration(first); err == nil && strings.ContainsAny(first, "hms") {
				bad = append(bad, fmt.Sprintf("%s: %q starts with a duration as text", path, x))
			}
		}
	}
	return bad
}

// TestJSONStyle runs every command with --format json and checks the one
// style. Negative control: the style check flags a duration as text
// ("state_ttl": "30m5s"), seconds where the style is milliseconds
// ("wall_seconds") and an _ms field that is not a number ("x_ms": "5s").
func TestJSONStyle(t *testing.T) {
	for _, old := range []string{`{"state_ttl":"30m5s"}`, `{"wall_seconds":1.5}`, `{"x_ms":"5s"}`, `{"models":[{"state_ttl":"30m5s (store 10m)"}]}`} {
		var v any
		if err := json.Unmarshal([]byte(old), &v); err != nil {
			t.Fatal(err)
		}
		if len(jsonStyle(v, "")) == 0 {
			t.Errorf("negative control: %s passes the style check", old)
		}
	}
	prefix := "json-" + randomHex(4) + "/"
	b, _ := openTest(t, "memory", prefix)
	for range 5 {
		if err := b.Failure(t.Context(), "open.example"); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		append(small, "--format", "json", "--store-ttl", "10m"),
		append(small, "--format", "json", "--state-ttl", "30m"), // kvbreaker refuses it: "message"
		{"check", "--backend", "memory", "--quick", "--quiet", "--format", "json"},
		{"inspect", "--backend", "memory", "--prefix", prefix, "--format", "json", "open.example"},
		{"inspect", "--backend", "memory", "--prefix", prefix, "--format", "json", "closed.example"},
		{"list", "--backend", "memory", "--prefix", prefix, "--format", "json"},
		{"reset", "--backend", "memory", "--prefix", prefix, "--format", "json", "--yes", "open.example"},
	} {
		code, out, errOut := runT(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: not JSON: %v", args, err)
		}
		for _, p := range jsonStyle(v, "") {
			t.Errorf("%s: %s", strings.Join(args[:1], " "), p)
		}
	}
	// Not applicable is null, not absent or zero.
	_, out, _ := runT(t, "inspect", "--backend", "memory", "--prefix", prefix, "--format", "json", "closed.example")
	for _, w := range []string{`"restrained_until": null`, `"restrained_for_ms": null`, `"message": null`} {
		if !strings.Contains(out, w) {
			t.Errorf("inspect of a host without record lacks %s:\n%s", w, out)
		}
	}
	_, out, _ = runT(t, append(small, "--format", "json")...)
	for _, w := range []string{`"store_ttl_ms": null`, `"state_ttl_ms": 1805000`, `"duration_ms": 7200000`} {
		if !strings.Contains(out, w) {
			t.Errorf("simulate JSON lacks %s", w)
		}
	}
}
