package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/kvbreaker/kvbreaker"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// secrets are values no output of the command may contain; tests add the
// ones they plant.
func secrets() []string {
	return []string{cfSrv.Token, awsSecret, awsKeyID, "wrong-token-must-not-show", "etcdpass-must-not-show"}
}

// runT runs the command in-process and fails t if any output carries a
// credential.
func runT(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	for _, s := range secrets() {
		if strings.Contains(o.String()+e.String(), s) {
			t.Errorf("kvbreaker %s: output shows a credential (%.6s…):\nstdout: %s\nstderr: %s", strings.Join(args, " "), s, o.String(), e.String())
		}
	}
	return code, o.String(), e.String()
}

// checkJSON runs check with --format json and decodes its report.
func checkJSON(t *testing.T, want int, args ...string) checkOutput {
	t.Helper()
	code, out, errOut := runT(t, append([]string{"check", "--format", "json"}, args...)...)
	if code != want {
		t.Fatalf("check %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
	}
	var rep checkOutput
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check output is not JSON: %v\n%s", err, out)
	}
	return rep
}

// row finds a promise row by its stable ID. The table's words are not in
// the JSON, so the tests read the structured fields.
func row(t *testing.T, rep checkOutput, promise string) promiseRow {
	t.Helper()
	for _, p := range rep.Promises {
		if p.Promise == promise {
			return p
		}
	}
	t.Fatalf("no %q row in %+v", promise, rep.Promises)
	return promiseRow{}
}

// leftovers counts the keys under prefix in each backend's server.
func leftovers(t *testing.T, backend, prefix string) int {
	t.Helper()
	ctx := t.Context()
	switch backend {
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: etcdSrv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return int(resp.Count)
	case "dynamodb":
		out, err := newClient(dynSrv.Endpoint).Scan(ctx, &dyn.ScanInput{
			TableName:                 aws.String(dynTable),
			FilterExpression:          aws.String("begins_with(pk, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items)
	case "cloudflarekv":
		keys, err := cfSrv.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	t.Fatalf("no leftover count for %s", backend)
	return 0
}

// TestCheck runs check against each real server of the matrix: every
// declared promise holds, the report carries measurements, and nothing is
// left under the throwaway prefix.
func TestCheck(t *testing.T) {
	t.Run("servers", func(t *testing.T) {
		for _, tc := range []struct {
			backend string
			quick   bool
			atomic  bool
		}{
			{"etcd", false, true},
			{"dynamodb", false, true},
			{"memory", false, true},
			// Miniflare's clock stands still, so real-time expiry is
			// checked on the next test's advanced clock; here the
			// command's own cloudflarekv backend, on the real clock.
			{"cloudflarekv", true, false},
		} {
			t.Run(tc.backend, func(t *testing.T) {
				t.Parallel()
				args := connArgs(tc.backend)
				if tc.quick {
					args = append(args, "--quick")
				}
				rep := checkJSON(t, exitOK, append(args, "--quiet")...)
				if !rep.OK || len(rep.Broken) > 0 {
					t.Fatalf("not ok: %v", rep.Broken)
				}
				cas := row(t, rep, rowCAS)
				if tc.atomic && (cas.Result != resultOK || cas.CasesRun == nil || *cas.CasesRun < 6 || *cas.CasesHeld != *cas.CasesRun) {
					t.Errorf("compare-and-swap row %+v", cas)
				}
				if !tc.atomic && (cas.Result != resultNotPromised || cas.CasesRun != nil) {
					t.Errorf("compare-and-swap row %+v for a last-writer-wins store", cas)
				}
				early, late := row(t, rep, rowNotEarly), row(t, rep, rowNotLate)
				if tc.quick {
					if early.Result != resultNotRun || early.MeasuredMS != nil || rep.Expiry != nil {
						t.Errorf("--quick ran expiry: %+v", early)
					}
					for _, c := range rep.Cases {
						if c.Case == "expiry" && (c.SkipReason == nil || *c.SkipReason != skipQuick) {
							t.Errorf("expiry case under --quick: %+v", c)
						}
					}
					// What --quick skipped is listed, never passed silently.
					if len(rep.NotVerified) == 0 {
						t.Errorf("--quick run lists nothing as not verified: %+v", rep.Cases)
					}
				} else if early.Result != resultOK || late.Result != resultOK || early.MeasuredMS == nil || rep.Expiry == nil || rep.Expiry.ClockAdvanced {
					t.Errorf("expiry rows %+v %+v", early, late)
				}
				if st := row(t, rep, rowStaleness); st.Result != resultOK {
					t.Errorf("read staleness row %+v", st)
				}
				if len(rep.RoundTrips) != 3 {
					t.Errorf("round trips %+v, want get, cas, delete", rep.RoundTrips)
				}
				for _, rt := range rep.RoundTrips {
					if rt.N == 0 || rt.P99MS < rt.P50MS {
						t.Errorf("round trip %+v", rt)
					}
				}
				if rep.Margin.ClockSkewMS != 1000 || rep.Margin.NeededMS < rep.Margin.DeclaredModelMS || rep.Margin.NeededMS <= 0 {
					t.Errorf("margin %+v", rep.Margin)
				}
				// A live store's lifetimes are out of check's reach: the
				// state TTL is listed with the waiver a harness would
				// need, and the run is ok.
				waiver := ""
				for _, nv := range rep.NotVerified {
					if nv.Promise == "state-ttl" && nv.Waiver != nil {
						waiver = *nv.Waiver
					}
				}
				if !strings.HasPrefix(waiver, "conformance.Waive(\"state-ttl\", ") {
					t.Errorf("not verified %+v: no waiver for %s", rep.NotVerified, "state-ttl")
				}
				if rep.Cleanup.Deleted == 0 || rep.Cleanup.Left != 0 {
					t.Errorf("cleanup %+v", rep.Cleanup)
				}
				if tc.backend != "memory" {
					if n := leftovers(t, tc.backend, rep.Prefix); n != 0 {
						t.Errorf("%d keys left under %q", n, rep.Prefix)
					}
				}
			})
		}
	})
	// Alone: advancing Miniflare's clock would expire the other runs'
	// entries.
	t.Run("cloudflarekv-advanced-clock", func(t *testing.T) {
		rep := checkJSON(t, exitOK, append(connArgs("cloudflarekv"), "--backend", "cloudflarekv-miniflare-clock", "--quiet")...)
		early, late := row(t, rep, rowNotEarly), row(t, rep, rowNotLate)
		if early.Result != resultOK || late.Result != resultOK || rep.Expiry == nil || !rep.Expiry.ClockAdvanced {
			t.Errorf("expiry rows %+v %+v (%+v)", early, late, rep.Expiry)
		}
		if a := row(t, rep, rowAbsent); a.Result != resultOK {
			t.Errorf("expired-counts-as-absent row %+v", a)
		}
		// 60 s minimum TTL, reader-filtered: the margin is granularity only.
		if rep.Margin.NeededMS != 1 {
			t.Errorf("margin %+v, want 1ms", rep.Margin)
		}
	})
}

// TestCheckTable: the table names every promise, the declared model and
// the margin, and progress goes to stderr.
func TestCheckTable(t *testing.T) {
	code, out, errOut := runT(t, append([]string{"check", "--quick"}, connArgs("etcd")...)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, w := range []string{"PROMISE", "DECLARED", "MEASURED", "compare-and-swap", "expiry: not early", "skipped (--quick)",
		"read staleness", "0 (linearizable)", "round trip get", "p99", "TTLMargin needed for clock skew 1s:", "relative expiry",
		"NOT VERIFIED (a pass says nothing about these):", "result: the store keeps every promise verified;",
		// What a harness would have to waive, and what that accepts,
		// without check failing for it.
		"a Breaker relies on state-ttl: a conformance harness that cannot verify it fails unless it waives it with\n         conformance.Waive(\"state-ttl\", ",
		"meaning trusting, unchecked, that a record written with the StateTTL", "check does not fail for these"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
	for _, w := range []string{"under prefix \"check-", "removed"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
}

// TestCheckBrokenStore: a store that expires entries 2 s early while
// declaring exact expiry makes check exit 1 and name the promise.
func TestCheckBrokenStore(t *testing.T) {
	rep := checkJSON(t, exitFail, "--backend", "broken-early-expiry", "--quiet")
	if rep.OK {
		t.Fatal("report says ok")
	}
	if early := row(t, rep, rowNotEarly); early.Result != resultBroken {
		t.Errorf("not-early row %+v", early)
	}
	if late := row(t, rep, rowNotLate); late.Result != resultOK {
		t.Errorf("not-late row %+v", late)
	}
	// Matched on the promise's stable ID, not its wording.
	found := false
	for _, b := range rep.Broken {
		found = found || (b.Case == "expiry" && b.Promise == "expiry-not-early")
	}
	if !found {
		t.Errorf("broken promises %+v lack the early-expiry one", rep.Broken)
	}
	if rep.Margin.NeededMS < rep.Margin.DeclaredModelMS+1500 {
		t.Errorf("margin %+v: the measured early expiry should raise it by about 2s", rep.Margin)
	}
	if rep.Expiry == nil || rep.Expiry.EarlyMS < 1500 || rep.Expiry.ClockAdvanced {
		t.Errorf("expiry measurement %+v: want about 2s early, waited", rep.Expiry)
	}

	// The table, with progress on stderr while the expiry case waits.
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 20 * time.Millisecond
	code, out, errOut := runT(t, "check", "--backend", "broken-early-expiry")
	if code != exitFail || !strings.Contains(out, "BROKEN") || !strings.Contains(out, "must not vanish before") ||
		!strings.Contains(out, "vanished between") || !strings.Contains(errOut, fmt.Sprintf("breaks %d promise(s)", len(rep.Broken))) ||
		!strings.Contains(errOut, "elapsed, ") {
		t.Errorf("table run: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestCheckTimeout: a --timeout shorter than the check gives up with exit
// 1, a partial report, and still cleans up.
func TestCheckTimeout(t *testing.T) {
	code, out, errOut := runT(t, "check", "--backend", "memory", "--timeout", "300ms", "--quiet", "--format", "json")
	if code != exitFail || !strings.Contains(errOut, "gave up after --timeout 300ms") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep checkOutput
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.TimedOut || rep.OK {
		t.Errorf("report %+v (%v)", rep, err)
	}
}

// openTest opens a backend with the command's own flags and returns a
// Breaker over it under prefix, as an application would, and a function
// that sends what its store has queued (cloudflarekv).
func openTest(t *testing.T, backend, prefix string) (*kvbreaker.Breaker, func()) {
	t.Helper()
	var bf backendFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	bf.register(fs)
	if err := fs.Parse(append(connArgs(backend), "--prefix", prefix)); err != nil {
		t.Fatal(err)
	}
	c, err := bf.open(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	s, err := kvbreaker.Prefixed(c.store, bf.prefix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kvbreaker.New(s, kvbreaker.Settings{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return b, c.close
}

func inspectJSON(t *testing.T, args ...string) inspectJSONOut {
	t.Helper()
	code, out, errOut := runT(t, append([]string{"inspect", "--format", "json"}, args...)...)
	if code != exitOK {
		t.Fatalf("inspect: exit %d\n%s\n%s", code, out, errOut)
	}
	var st inspectJSONOut
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("inspect output is not JSON: %v\n%s", err, out)
	}
	return st
}

// TestInspectReset opens a circuit with a Breaker over each backend, then
// inspects it, refuses a reset without --yes, resets it and inspects again.
func TestInspectReset(t *testing.T) {
	for _, backend := range []string{"etcd", "dynamodb", "cloudflarekv", "memory"} {
		t.Run(backend, func(t *testing.T) {
			prefix := "inspect-" + randomHex(4) + "/"
			b, flush := openTest(t, backend, prefix)
			ctx := t.Context()
			for range 5 {
				if err := b.Failure(ctx, "mastodon.example"); err != nil {
					t.Fatal(err)
				}
			}
			// Another process reads it: let queued writes go.
			flush()
			args := append(connArgs(backend), "--prefix", prefix)
			url := "https://Mastodon.EXAMPLE:443/inbox"

			st := inspectJSON(t, append(args, url)...)
			if !st.Found || st.State != "open" || len(st.Failures) != 5 || st.FailureCount != 5 || st.RestrainedUntil == nil ||
				*st.RestrainedForMS <= 25*60e3 || *st.RestrainedForMS > 30*60e3 || st.RecordBytes == 0 || st.Version == 0 || st.Probing || !st.RecordValid {
				t.Errorf("inspect of an open circuit: %+v", st)
			}
			if st.Host != "mastodon.example" {
				t.Errorf("host %q, want mastodon.example", st.Host)
			}
			code, out, errOut := runT(t, append([]string{"inspect"}, append(args, "mastodon.example")...)...)
			if code != exitOK || !strings.Contains(out, "state:             open") || !strings.Contains(out, "failures:          5") ||
				!strings.Contains(out, "from now") {
				t.Errorf("inspect table: exit %d\n%s\n%s", code, out, errOut)
			}

			code, out, errOut = runT(t, append([]string{"reset"}, append(args, url)...)...)
			if code != exitUsage || !strings.Contains(errOut, "add --yes") {
				t.Errorf("reset without --yes: exit %d\n%s\n%s", code, out, errOut)
			}
			if st := inspectJSON(t, append(args, url)...); st.State != "open" {
				t.Errorf("reset without --yes changed the state: %+v", st)
			}

			code, out, errOut = runT(t, append([]string{"reset", "--yes", "--format", "json"}, append(args, url)...)...)
			if code != exitOK || !strings.Contains(out, `"state_before": "open"`) || !strings.Contains(out, `"state": "closed"`) {
				t.Fatalf("reset --yes: exit %d\n%s\n%s", code, out, errOut)
			}
			if st := inspectJSON(t, append(args, url)...); st.Found || st.State != "closed" {
				t.Errorf("after reset: %+v", st)
			}
			// A worker of the fleet sees it closed too.
			b2, _ := openTest(t, backend, prefix)
			if v, err := b2.Allow(ctx, "mastodon.example", time.Time{}); err != nil || v.Decision != kvbreaker.Send {
				t.Errorf("Allow after reset = %+v, %v", v, err)
			}
		})
	}
}
