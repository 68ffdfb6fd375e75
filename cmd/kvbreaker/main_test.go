package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  []string // in stdout, or stderr when code != 0
	}{
		{"help-flag", []string{"--help"}, exitOK, []string{"Usage:", "kvbreaker [command]", "simulate", "kvbreaker simulate", "Available Commands:"}},
		{"help-command", []string{"help", "simulate"}, exitOK, []string{"kvbreaker simulate [flags]", "fedify-model", "a Go model of fedify 2.3.x", "--races", "--state-ttl", "--store-ttl", "Examples:"}},
		// cobra's convention (kubectl, gh): no command shows the help.
		{"no-arguments", nil, exitOK, []string{"Available Commands:", "simulate"}},
		{"simulate-help", []string{"simulate", "--help"}, exitOK, []string{"kvbreaker simulate [flags]", "two-field", "kvbreaker", "--format", "table or json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			text := out + errOut
			for _, w := range tc.out {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

func TestSimulateBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown-flag", []string{"--bogus"}, "Error: unknown flag: --bogus"},
		{"bad-duration", []string{"--duration", "forever"}, `invalid argument "forever" for "--duration" flag`},
		{"negative-workers", []string{"--workers", "-3"}, "workers is -3"},
		{"zero-hosts", []string{"--hosts", "0"}, "--hosts must be positive"},
		{"bad-format", []string{"--format", "xml"}, `--format is "xml": want table or json`},
		{"bad-mix", []string{"--mix", "zombie=3"}, `unknown behaviour "zombie"`},
		{"negative-state-ttl", []string{"--state-ttl", "-1m"}, "state TTL is -1m0s"},
		{"state-ttl-below-recovery", []string{"--state-ttl", "10m"}, "fedify 2.3.3 and later refuse it"},
		{"negative-store-ttl", []string{"--store-ttl", "-1m"}, "store TTL is -1m0s"},
		{"stray-argument", []string{"now"}, `unexpected argument "now"`},
		{"sub-millisecond", []string{"--recovery-delay", "1500us"}, "whole milliseconds"},
		{"negative-mirror-delay", []string{"--mirror-delay", "-5ms"}, "--mirror-delay must be 0 or more"},
		{"sub-millisecond-mirror-delay", []string{"--mirror-delay", "500us"}, "mirror delay is 500µs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(append([]string{"simulate"}, tc.args...)...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d", code, exitUsage)
			}
			if out != "" {
				t.Errorf("stdout should be empty on a usage error, got %q", out)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, errOut)
			}
		})
	}
}

// small keeps the command tests quick.
var small = []string{"simulate", "--hosts", "40", "--duration", "2h", "--mix", "healthy=2,dead=1,flapping=1"}

func TestSimulateJSON(t *testing.T) {
	code, out, errOut := runCmd(append(small, "--format", "json", "--races")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Races    bool `json:"races"`
		Baseline struct {
			Model            string `json:"model"`
			SendsToDownHosts *int   `json:"sends_to_down_hosts"`
		} `json:"baseline"`
		Models []map[string]any `json:"models"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if !got.Races || got.Baseline.SendsToDownHosts == nil || *got.Baseline.SendsToDownHosts == 0 {
		t.Fatalf("baseline missing or empty: %+v", got.Baseline)
	}
	var names []string
	for _, m := range got.Models {
		names = append(names, m["model"].(string))
		// Every model carries its store cost.
		for _, k := range []string{"store_reads", "store_writes", "requests_per_1000_deliveries"} {
			if v, ok := m[k].(float64); !ok || v <= 0 {
				t.Errorf("model %v: %q missing, not a number or zero: %v", m["model"], k, m[k])
			}
		}
		if m["cost_only"] == true {
			continue
		}
		for _, k := range []string{"decisions", "agreement", "unsafe_divergences", "safe_divergences", "transition_mismatches",
			"sends_to_down_hosts", "probes", "drops", "peak_records", "records_left_after_quiet",
			"silent_closes", "sends_instead_of_probe", "sends_instead_of_hold", "late_failures_counted_closed", "reopens_after_expiry"} {
			if _, ok := m[k].(float64); !ok {
				t.Errorf("model %v: %q missing or not a number", m["model"], k)
			}
		}
		if m["sends_to_down_hosts"].(float64) >= float64(*got.Baseline.SendsToDownHosts) {
			t.Errorf("%v sent as much to down hosts as no breaker", m["model"])
		}
	}
	if strings.Join(names, ",") != "fedify-model,two-field,kvbreaker,kvbreaker+cache,kvbreaker+mirror,gobreaker-distributed" {
		t.Fatalf("models = %v", names)
	}
}

func TestSimulateTable(t *testing.T) {
	code, out, errOut := runCmd(small...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"no breaker", "fedify-model", "two-field", "kvbreaker", "kvbreaker+cache", "kvbreaker+mirror", "gobreaker-distributed",
		"mirror: delay", "requests/1,000 w/o feed reads", "reads after a Stale (in reads)", "stale retry instants", "stale outcomes", "longest lag among them",
		"store reads", "store writes", "requests per 1,000 deliveries", "sends to down hosts", "spared vs no breaker",
		"agreement with fedify-model", "100.0000%", "records left after 1h0m0s quiet", "Without a breaker the fleet sent"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
}

// TestSimulateStoreTTL: --store-ttl puts every breaker over a store that
// expires records inside the restraint; the table names the columns so and
// shows the expiry effects, and the JSON carries them. A --state-ttl below
// the recovery delay is refused, as fedify 2.3.3+ and kvbreaker refuse it:
// it would run fedify's model with a stateTtl fedify itself refuses, so a
// short-lived store is --store-ttl's to model.
func TestSimulateStoreTTL(t *testing.T) {
	code, out, errOut := runCmd(append(small, "--store-ttl", "10m")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"fedify-model@ttl10m", "kvbreaker@ttl10m", "silent closes", "sends instead of hold",
		"late failures counted as closed", "reopens after expiry", "(store 10m)", "A silent close:"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	code, out, errOut = runCmd(append(small, "--store-ttl", "10m", "--format", "json")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Models []struct {
			Model        string `json:"model"`
			CostOnly     bool   `json:"cost_only"`
			SilentCloses int    `json:"silent_closes"`
			InsteadHold  int    `json:"sends_instead_of_hold"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for _, m := range got.Models {
		if m.CostOnly {
			continue // gobreaker's cost: it keeps no TTL'd record
		}
		if !strings.HasSuffix(m.Model, "@ttl10m") || m.SilentCloses == 0 || m.InsteadHold == 0 {
			t.Errorf("store TTL 10m: %+v", m)
		}
	}
	// fedify accepts a stateTtl of 30m (= recoveryDelay); kvbreaker needs
	// its margin on top and refuses it, saying why.
	code, out, errOut = runCmd(append(small, "--state-ttl", "30m")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"refused", "kvbreaker refused this configuration", "StateTTL is 30m0s"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestSimulateMirrorDelay: --mirror-delay reaches kvbreaker+mirror's report
// (JSON in milliseconds, 0 meaning at once, not the default), and without
// delay the mirror decides as kvbreaker does, with nothing stale; with a
// long one it has stale decisions, each lagging less than the delay.
func TestSimulateMirrorDelay(t *testing.T) {
	mirror := func(delay string) (kv, mir map[string]any) {
		t.Helper()
		code, out, errOut := runCmd(append(small, "--format", "json", "--mirror-delay", delay)...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var got struct {
			Models []map[string]any `json:"models"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		for _, m := range got.Models {
			switch m["model"] {
			case "kvbreaker":
				kv = m
			case "kvbreaker+mirror":
				mir = m
			}
		}
		if kv == nil || mir == nil {
			t.Fatalf("no kvbreaker or kvbreaker+mirror in %s", out)
		}
		return kv, mir
	}
	kv, mir := mirror("0")
	m, _ := mir["mirror"].(map[string]any)
	if m["delay_ms"] != 0.0 || m["stale_decisions"] != 0.0 || mir["agreement"] != kv["agreement"] || mir["store_writes"] != kv["store_writes"] {
		t.Errorf("--mirror-delay 0: %v, want delay_ms 0, nothing stale, kvbreaker's agreement %v and writes %v", mir, kv["agreement"], kv["store_writes"])
	}
	if _, ok := kv["mirror"]; !ok || kv["mirror"] != nil {
		t.Errorf("kvbreaker's mirror report: %v, want null", kv["mirror"])
	}
	_, mir = mirror("10m")
	m, _ = mir["mirror"].(map[string]any)
	if m["delay_ms"] != 600000.0 || m["stale_decisions"] == 0.0 || m["max_lag_ms"].(float64) >= 600000 {
		t.Errorf("--mirror-delay 10m: %v, want delay_ms 600000 and stale decisions lagging less", m)
	}
}

func TestNum(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4321: "-4,321"} {
		if got := num(n); got != want {
			t.Errorf("num(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestHelpNamesEveryStore: the root help and the help of every command that
// connects to a store name all six backends (the root help named four).
func TestHelpNamesEveryStore(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"check", "--help"}, {"list", "--help"}, {"inspect", "--help"}, {"reset", "--help"}, {"init", "--help"}} {
		code, out, errOut := runCmd(args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		for _, name := range publicBackends {
			word := map[string]string{"cloudflarekv": "Workers KV", "dynamodb": "DynamoDB", "etcd": "etcd",
				"memory": "memory", "postgres": "PostgreSQL", "redis": "Redis"}[name]
			if !strings.Contains(out, word) {
				t.Errorf("kvbreaker %s does not name %s (%q)", strings.Join(args, " "), name, word)
			}
		}
	}
}
