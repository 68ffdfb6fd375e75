package model

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// The fedify release TestAgainstFedify drives, and the exact versions of
// the three packages its circuit-breaker module imports (the ranges in its
// package.json, pinned). fedify is fetched with npm pack, not npm install:
// its other dependencies are not needed here (and @fedify/vocab 2.3.8 is
// missing from some registry mirrors).
const (
	fedifyVersion = "2.3.8"
	fedifyEnv     = "KVBREAKER_FEDIFY"
)

var fedifyDeps = []string{"@js-temporal/polyfill@0.5.1", "urlpattern-polyfill@10.1.0", "@logtape/logtape@2.2.0"}

// TestAgainstFedify drives fedify 2.3.8's own CircuitBreaker (node,
// testdata/fedify/driver.mjs, a fake clock, an in-memory KV store with
// TTLs) and this package's Fedify model on the same random call streams,
// and compares every decision, hold retry instant and onStateChange label.
// On the same streams it compares kvbreaker's Breaker too, at every call
// of a host whose record has not expired before the other's (the TTLs
// differ: kvbreaker derives its own; from such an expiry until the host's
// next success that host is skipped and counted).
//
// Opt-in, not part of make test: it needs node and an npm registry, and
// caches fedify under the user cache directory.
//
//	KVBREAKER_FEDIFY=1 go test -run TestAgainstFedify -v ./internal/model/
func TestAgainstFedify(t *testing.T) {
	if os.Getenv(fedifyEnv) == "" {
		t.Skipf("opt-in: set %s=1 to drive fedify %s's own CircuitBreaker (needs node and npm registry access)", fedifyEnv, fedifyVersion)
	}
	chunk, dir := installFedify(t)

	const streams, steps = 300, 400
	var in []nodeStream
	var runs []nodeRun
	for seed := range uint64(streams) {
		s, r := fedifyStream(seed, steps)
		in = append(in, s)
		runs = append(runs, r)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "node", filepath.Join(dir, "driver.mjs"), chunk)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("node driver.mjs: %v\n%s", err, stderr.String())
	}
	var out [][]nodeAnswer
	if err := json.Unmarshal(outb, &out); err != nil || len(out) != streams {
		t.Fatalf("driver output: %v (%d streams)", err, len(out))
	}

	var calls, decisions, holds, probes, labels, expired, kvCompared, kvSkipped int
	var bad []string
	for i, run := range runs {
		if len(out[i]) != len(run.calls) {
			t.Fatalf("stream %d: %d answers for %d calls", i, len(out[i]), len(run.calls))
		}
		for j, c := range run.calls {
			want := out[i][j]
			calls++
			if want.From != "" {
				labels++
			}
			switch want.Decision {
			case "":
			case "hold":
				holds++
				decisions++
			case "probe":
				probes++
				decisions++
			default:
				decisions++
			}
			if c.expired {
				expired++
			}
			if got := run.fedify[j]; got != want {
				bad = append(bad, fmt.Sprintf("stream %d (%s) call %d %+v: fedify %s %+v, Go model %+v", i, in[i].Options, j, in[i].Calls[j], fedifyVersion, want, got))
			}
			if !c.kvInStep {
				kvSkipped++
				continue
			}
			kvCompared++
			if got := run.kv[j]; got != want {
				bad = append(bad, fmt.Sprintf("stream %d (%s) call %d %+v: fedify %s %+v, kvbreaker %+v", i, in[i].Options, j, in[i].Calls[j], fedifyVersion, want, got))
			}
		}
	}
	t.Logf("%d streams, %d calls (%d decisions: %d holds, %d probes; %d state changes; %d calls found fedify's record expired); kvbreaker compared on %d calls, skipped %d after one record expired before the other",
		streams, calls, decisions, holds, probes, labels, expired, kvCompared, kvSkipped)
	if len(bad) > 0 {
		t.Errorf("%d mismatches; the first:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	if probes == 0 || holds == 0 || labels == 0 || expired == 0 || kvCompared == 0 {
		t.Error("the streams exercise too little: a comparison that cannot fail proves nothing")
	}
}

type nodeOptions struct {
	FailureThreshold  int    `json:"failureThreshold"`
	FailureWindowMs   int64  `json:"failureWindowMs"`
	RecoveryDelayMs   int64  `json:"recoveryDelayMs"`
	ReleaseIntervalMs int64  `json:"releaseIntervalMs"`
	HeldActivityTTLMs int64  `json:"heldActivityTtlMs"`
	StateTTLMs        *int64 `json:"stateTtlMs,omitempty"`
}

func (o nodeOptions) String() string {
	ttl := "derived"
	if o.StateTTLMs != nil {
		ttl = (time.Duration(*o.StateTTLMs) * time.Millisecond).String()
	}
	return fmt.Sprintf("threshold %d, window %v, recovery %v, release %v, held TTL %v, state TTL %s", o.FailureThreshold,
		time.Duration(o.FailureWindowMs)*time.Millisecond, time.Duration(o.RecoveryDelayMs)*time.Millisecond,
		time.Duration(o.ReleaseIntervalMs)*time.Millisecond, time.Duration(o.HeldActivityTTLMs)*time.Millisecond, ttl)
}

type nodeCall struct {
	Op        string `json:"op"`
	Host      string `json:"host"`
	At        int64  `json:"at"`
	HeldSince *int64 `json:"heldSince,omitempty"`
}

type nodeStream struct {
	Options nodeOptions `json:"options"`
	Calls   []nodeCall  `json:"calls"`
}

// nodeAnswer is one call's answer, as the driver prints it.
type nodeAnswer struct {
	Decision string `json:"decision,omitempty"`
	RetryAt  int64  `json:"retryAt,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
}

type nodeRun struct {
	fedify, kv []nodeAnswer
	calls      []struct{ kvInStep, expired bool }
}

func answer(v *Verdict, tr Transition) nodeAnswer {
	var a nodeAnswer
	if v != nil {
		a.Decision = strings.ToLower(v.Decision.String())
		if v.Decision == kvbreaker.Hold {
			a.RetryAt = v.RetryAt.UnixMilli()
		}
	}
	if tr.Changed() {
		a.From, a.To = tr.From.String(), tr.To.String()
	}
	return a
}

// fedifyStream draws a random stream over two hosts: decisions for fresh
// and held messages, failures and successes in any order (outcomes of
// deliveries decided long ago included), at gaps on every boundary of the
// options; a third of the streams set an explicit stateTtl at or just
// above recoveryDelay, so records expire inside the stream. It plays the
// stream on the Go model and on kvbreaker.
func fedifyStream(seed uint64, steps int) (nodeStream, nodeRun) {
	rng := rand.New(rand.NewPCG(seed, 0xfed1f7))
	fo, _, ks := streamOptions(rng)
	if rng.IntN(3) == 0 {
		fo.StateTTL = []time.Duration{fo.RecoveryDelay, fo.RecoveryDelay + time.Second, fo.RecoveryDelay + fo.FailureWindow}[rng.IntN(3)]
	}
	fed, err := NewFedify(fo)
	if err != nil {
		panic(err) // streamOptions draws valid options only
	}
	cfg := fed.Config()
	now := time.UnixMilli(0).UTC()
	kv, err := NewKvbreaker(ks, func() time.Time { return now })
	if err != nil {
		panic(err)
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	s := nodeStream{Options: nodeOptions{FailureThreshold: cfg.FailureThreshold, FailureWindowMs: ms(cfg.FailureWindow),
		RecoveryDelayMs: ms(cfg.RecoveryDelay), ReleaseIntervalMs: ms(cfg.ReleaseInterval), HeldActivityTTLMs: ms(cfg.HeldActivityTTL)}}
	if fo.StateTTL > 0 {
		v := ms(fo.StateTTL)
		s.Options.StateTTLMs = &v
	}
	gaps := []time.Duration{0, time.Millisecond, 999 * time.Millisecond, cfg.ReleaseInterval, 30 * time.Second,
		cfg.FailureWindow - time.Millisecond, cfg.FailureWindow, cfg.RecoveryDelay - time.Millisecond, cfg.RecoveryDelay,
		cfg.RecoveryDelay + time.Millisecond, cfg.StateTTL, cfg.HeldActivityTTL, 2 * time.Hour}
	var run nodeRun
	outOfStep := map[string]bool{}
	for range steps {
		if rng.IntN(3) == 0 {
			now = now.Add(gaps[rng.IntN(len(gaps))])
		}
		host := []string{"a.example", "b.example"}[rng.IntN(2)]
		c := nodeCall{Host: host, At: now.UnixMilli()}
		var fa, ka nodeAnswer
		e, ok := fed.store.m[host]
		expired := ok && !now.Before(e.expires)
		if fed.Live(host, now) != kv.Live(host, now) {
			// One record expired before the other (the TTLs differ).
			outOfStep[host] = true
		}
		inStep := !outOfStep[host]
		switch p := rng.IntN(10); {
		case p < 5:
			c.Op = "allow"
			var since time.Time
			if rng.IntN(3) == 0 {
				since = now.Add(-[]time.Duration{0, time.Second, cfg.HeldActivityTTL - time.Millisecond, cfg.HeldActivityTTL}[rng.IntN(4)])
				v := since.UnixMilli()
				c.HeldSince = &v
			}
			v, tr := fed.Allow(host, now, since)
			fa = answer(&v, tr)
			kvv, ktr := kv.Allow(host, now, since)
			ka = answer(&kvv, ktr)
		case p < 8:
			c.Op = "failure"
			fa = answer(nil, fed.Failure(host, now))
			ka = answer(nil, kv.Failure(host, now))
		default:
			c.Op = "success"
			fa = answer(nil, fed.Success(host, now))
			ka = answer(nil, kv.Success(host, now))
			// Both delete the record: in step again.
			delete(outOfStep, host)
		}
		s.Calls = append(s.Calls, c)
		run.fedify = append(run.fedify, fa)
		run.kv = append(run.kv, ka)
		run.calls = append(run.calls, struct{ kvInStep, expired bool }{inStep, expired})
	}
	if err := kv.Err(); err != nil {
		panic(err)
	}
	return s, run
}

// installFedify puts fedify's package (npm pack) and its circuit breaker's
// three imports (npm install) in a cache directory once, copies the driver
// there, and returns the circuit-breaker module and the directory. It
// skips the test, saying why, when node or npm or a package is missing.
func installFedify(t *testing.T) (chunk, dir string) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found on PATH: TestAgainstFedify needs Node.js 20 and npm", tool)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no user cache directory for fedify's package: %v", err)
	}
	dir = filepath.Join(cache, "kvbreaker", "fedify-"+fedifyVersion)
	pkg := filepath.Join(dir, "node_modules", "@fedify", "fedify")
	done := filepath.Join(dir, ".installed")
	if _, err := os.Stat(done); err != nil {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		npm := func(args ...string) []byte {
			cmd := exec.CommandContext(t.Context(), "npm", args...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Skipf("npm %s failed, so fedify %s cannot be driven here: %v\n%s", strings.Join(args, " "), fedifyVersion, err, out)
			}
			return out
		}
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true, "type": "module"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// Install first: npm install prunes packages it did not install.
		npm(append([]string{"install", "--no-save", "--no-audit", "--no-fund", "--ignore-scripts"}, fedifyDeps...)...)
		name := strings.TrimSpace(string(npm("pack", "--silent", "@fedify/fedify@"+fedifyVersion)))
		if err := untarPackage(filepath.Join(dir, name), pkg); err != nil {
			t.Fatalf("unpacking %s: %v", name, err)
		}
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	driver, err := os.ReadFile(filepath.Join("testdata", "fedify", "driver.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "driver.mjs"), driver, 0o644); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(pkg, "dist", "circuit-breaker-*.mjs"))
	for _, m := range matches {
		if !strings.Contains(filepath.Base(m), "test") {
			return m, dir
		}
	}
	t.Fatalf("no dist/circuit-breaker-*.mjs in fedify %s's package at %s", fedifyVersion, pkg)
	return "", ""
}

// untarPackage extracts an npm tarball's package/ directory into dst.
func untarPackage(tgz, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name, ok := strings.CutPrefix(h.Name, "package/")
		if !ok || h.Typeflag != tar.TypeReg || !filepath.IsLocal(name) {
			continue
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		w, err := os.Create(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, tr)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}
