package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

const dashToken = "dash-token-of-the-test-must-not-show"

// redisChanges is Redis's own count of the writes it applied since its
// last save (INFO persistence: rdb_changes_since_last_save), which it
// keeps whether or not it saves.
func redisChanges(t *testing.T, cli *goredis.Client) int {
	t.Helper()
	info, err := cli.Info(t.Context(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "rdb_changes_since_last_save:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("INFO persistence has no rdb_changes_since_last_save:\n%s", info)
	return 0
}

// TestDashboardCommand: kvbreaker dashboard over Redis shows the circuit a
// worker opened under its prefix, answers 405 to every route that would
// write, even for a token that carries every permission, and Redis counts
// no write from it; SIGTERM ends it cleanly and no output shows a token.
func TestDashboardCommand(t *testing.T) {
	rs := redistest.MustStart(t)
	cli := goredis.NewClient(&goredis.Options{Addr: rs.Addr(), ContextTimeoutEnabled: true})
	defer cli.Close()
	st, err := redis.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := kvbreaker.Prefixed(st, "prod/")
	if err != nil {
		t.Fatal(err)
	}
	worker, err := kvbreaker.New(ps, kvbreaker.Settings{FailureThreshold: 1, SkipClockCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := worker.Record(ctx, "a.example", kvbreaker.Failure); err != nil {
		t.Fatal(err)
	}
	before := redisChanges(t, cli)

	t.Setenv(tokensEnv, "oncall read "+dashToken+";root decide,report,read,reset,metrics root-token-0123456789abcdef")
	d := startListener(t, "dashboard", "--backend", "redis", "--redis-url", rs.URL(), "--prefix", "prod/")
	get := func(path string, out any) int {
		t.Helper()
		req, _ := http.NewRequest("GET", d.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+dashToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, b)
		}
		return resp.StatusCode
	}
	var status struct {
		ReadOnly bool `json:"read_only"`
		Circuits []struct{ Host, State string }
	}
	if code := get("/v1/status", &status); code != 200 || !status.ReadOnly || len(status.Circuits) != 1 || status.Circuits[0].Host != "a.example" || status.Circuits[0].State != "open" {
		t.Fatalf("GET /v1/status: %d %+v", code, status)
	}
	for _, path := range []string{"/v1/decide", "/v1/outcomes"} {
		if code, out := d.post(http.DefaultClient, path, "root-token-0123456789abcdef", `{"deliveries":[{"host":"a.example"}]}`); code != 405 || !strings.HasSuffix(out["type"].(string), ":read-only") {
			t.Errorf("POST %s: %d %v, want 405 read-only", path, code, out)
		}
	}
	req, _ := http.NewRequest("DELETE", d.base+"/v1/circuits/a.example", nil)
	req.Header.Set("Authorization", "Bearer root-token-0123456789abcdef")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 405 {
		t.Errorf("DELETE: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}
	var c struct{ State string }
	if code := get("/v1/circuits/a.example", &c); code != 200 || c.State != "open" {
		t.Errorf("GET /v1/circuits/a.example: %d %+v", code, c)
	}
	if after := redisChanges(t, cli); after != before {
		t.Errorf("Redis applied %d writes while the dashboard ran", after-before)
	}
	// Negative control: the count moves on a write.
	if err := worker.Reset(ctx, "a.example"); err != nil {
		t.Fatal(err)
	}
	if after := redisChanges(t, cli); after == before {
		t.Error("Redis did not count the worker's reset: the count proves nothing")
	}

	if code := d.shutdown(); code != exitOK {
		t.Fatalf("SIGTERM: exit %d, %v\n%s", code, d.err, d.errText.String())
	}
	if !strings.Contains(d.errText.String(), "kvbreaker dashboard: stopped") {
		t.Errorf("no clean stop:\n%s", d.errText.String())
	}
	for _, text := range []string{d.out.String(), d.errText.String()} {
		if strings.Contains(text, dashToken) || strings.Contains(text, "root-token") {
			t.Errorf("output shows a token:\n%s", text)
		}
	}
}

// TestDashboardUsage: a dashboard whose tokens cannot read would refuse
// every request, so it does not start; the message names the permission
// and quotes no token.
func TestDashboardUsage(t *testing.T) {
	t.Setenv(tokensEnv, "workers decide,report sec-0123456789abcdef-must-not-show")
	var o, e bytes.Buffer
	code, err := executeErr(context.Background(), func() {}, []string{"dashboard", "--backend", "memory"}, &o, &e)
	if code != exitUsage || !strings.Contains(e.String(), "no token carries read") {
		t.Errorf("exit %d, want 2 with \"no token carries read\": %v\n%s", code, err, e.String())
	}
	if strings.Contains(e.String()+o.String(), "sec-") {
		t.Errorf("output shows the token:\n%s", e.String())
	}
	code, out, errOut := runT(t, "dashboard", "--help")
	for _, w := range []string{"kvbreaker dashboard --backend NAME", "read-only", "--tokens-file", "--listen", "KVBREAKER_DASHBOARD_LISTEN", "127.0.0.1:8421", "--redis-url", "Examples:"} {
		if code != exitOK || !strings.Contains(out, w) {
			t.Errorf("dashboard --help (exit %d) lacks %q:\n%s%s", code, w, out, errOut)
		}
	}
	if code, out, _ := runT(t, "--help"); code != exitOK || !strings.Contains(out, "\n  dashboard ") {
		t.Errorf("--help does not list dashboard:\n%s", out)
	}
}
