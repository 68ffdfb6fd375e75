package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
)

// lockedBuffer is a bytes.Buffer the command writes while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// served is a running "kvbreaker serve".
type served struct {
	t       *testing.T
	base    string
	stop    context.CancelFunc
	done    chan struct{}
	code    int
	err     error
	out     bytes.Buffer
	errText *lockedBuffer
}

var listening = regexp.MustCompile(`listening on (https?://[0-9.:]+) `)

// startServe runs "kvbreaker serve args..." on a free port until the test
// ends, and waits until it listens.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	return startListener(t, "serve", args...)
}

// startListener runs "kvbreaker command args..." (serve or dashboard) on a
// free port until the test ends, and waits until it listens.
func startListener(t *testing.T, command string, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{t: t, stop: cancel, done: make(chan struct{}), errText: &lockedBuffer{}}
	go func() {
		defer close(s.done)
		s.code, s.err = executeErr(ctx, func() {}, append([]string{command, "--listen", "127.0.0.1:0"}, args...), &s.out, s.errText)
	}()
	t.Cleanup(func() { s.shutdown() })
	deadline := time.After(30 * time.Second)
	for {
		if m := listening.FindStringSubmatch(s.errText.String()); m != nil {
			s.base = m[1]
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("%s exited %d before listening: %v\n%s", command, s.code, s.err, s.errText.String())
		case <-deadline:
			t.Fatalf("%s did not listen within 30s:\n%s", command, s.errText.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// shutdown is a SIGTERM: it returns the exit code.
func (s *served) shutdown() int {
	s.stop()
	<-s.done
	return s.code
}

func (s *served) post(client *http.Client, path, token, body string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// verdict is the first verdict of a /v1/decide answer.
func verdict(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	vs, _ := out["verdicts"].([]any)
	if len(vs) == 0 {
		t.Fatalf("no verdicts: %v", out)
	}
	return vs[0].(map[string]any)
}

const serveToken = "tok-of-the-serve-test-must-not-show"

// TestServeCommand: tokens from the environment, a decision, a refused
// request, then SIGTERM ends it cleanly; no output shows the token.
func TestServeCommand(t *testing.T) {
	t.Setenv(tokensEnv, "workers decide,report "+serveToken+";ops read,reset other-token-0123456789")
	s := startServe(t, "--backend", "memory", "--failure-threshold", "1")
	code, out := s.post(http.DefaultClient, "/v1/decide", serveToken, `{"deliveries":[{"host":"a.example"}]}`)
	if code != 200 || verdict(t, out)["decision"] != "send" {
		t.Fatalf("decide: %d %v", code, out)
	}
	if code, out = s.post(http.DefaultClient, "/v1/outcomes", serveToken, `{"outcomes":[{"host":"a.example","outcome":"failure"}]}`); code != 200 {
		t.Fatalf("outcomes: %d %v", code, out)
	}
	// --failure-threshold reached the Breaker: one failure opened it.
	if code, out = s.post(http.DefaultClient, "/v1/decide", serveToken, `{"deliveries":[{"host":"a.example"}]}`); verdict(t, out)["decision"] != "hold" {
		t.Fatalf("after one failure with --failure-threshold 1: %d %v", code, out)
	}
	if code, _ := s.post(http.DefaultClient, "/v1/decide", serveToken+"x", `{"deliveries":[{"host":"a.example"}]}`); code != 401 {
		t.Fatalf("a wrong token: %d", code)
	}
	if code := s.shutdown(); code != exitOK {
		t.Fatalf("SIGTERM: exit %d, %v\n%s", code, s.err, s.errText.String())
	}
	if !strings.Contains(s.errText.String(), "kvbreaker serve: stopped") {
		t.Errorf("no clean stop:\n%s", s.errText.String())
	}
	for _, text := range []string{s.out.String(), s.errText.String()} {
		if strings.Contains(text, serveToken) || strings.Contains(text, "other-token") {
			t.Errorf("output shows a token:\n%s", text)
		}
	}
}

// TestServeUsage: what serve refuses before it connects, each message
// saying what to change and none quoting a token.
func TestServeUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"no-tokens", nil, "", "no tokens"},
		{"short-token", nil, "w decide sec-short", "at least 16"},
		{"bad-permission", nil, "w write sec-0123456789abcdef-must-not-show", `permission "write"`},
		{"tls-half", []string{"--tls-cert", "x.pem"}, "w decide sec-0123456789abcdef-must-not-show", "--tls-cert and --tls-key go together"},
		{"client-ca-no-tls", []string{"--client-ca", "ca.pem"}, "w decide sec-0123456789abcdef-must-not-show", "--client-ca needs TLS"},
		{"bad-listen", []string{"--listen", "8420"}, "w decide sec-0123456789abcdef-must-not-show", "want host:port"},
		{"bad-settings", []string{"--failure-threshold", "-1"}, "w decide sec-0123456789abcdef-must-not-show", "FailureThreshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tokensEnv, tc.env)
			var o, e bytes.Buffer
			code, err := executeErr(context.Background(), func() {}, append([]string{"serve", "--backend", "memory"}, tc.args...), &o, &e)
			if code != exitUsage || !strings.Contains(e.String(), tc.want) {
				t.Errorf("exit %d, want 2 with %q: %v\n%s", code, tc.want, err, e.String())
			}
			if strings.Contains(e.String()+o.String(), "sec-") {
				t.Errorf("output shows the token:\n%s", e.String())
			}
		})
	}
}

// TestServeMutualTLS: with --client-ca every connection must present a
// certificate the CA signed; a verified one carries
// --client-cert-permissions and nothing more.
func TestServeMutualTLS(t *testing.T) {
	pki := tlstest.MustNew(t, "serve")
	t.Setenv(tokensEnv, "")
	s := startServe(t, "--backend", "memory", "--tls-cert", pki.ServerCertFile, "--tls-key", pki.ServerKeyFile,
		"--client-ca", pki.CAFile, "--client-cert-permissions", "decide")
	if !strings.HasPrefix(s.base, "https://") {
		t.Fatalf("not TLS: %s", s.base)
	}
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientConfig()}}
	code, out := s.post(withCert, "/v1/decide", "", `{"deliveries":[{"host":"tls.example"}]}`)
	if code != 200 || verdict(t, out)["decision"] != "send" {
		t.Fatalf("decide with a client certificate: %d %v", code, out)
	}
	if code, out := s.post(withCert, "/v1/outcomes", "", `{"outcomes":[{"host":"tls.example","outcome":"failure"}]}`); code != 403 {
		t.Fatalf("report with a decide-only certificate: %d %v", code, out)
	}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ServerOnlyConfig()}}
	req, _ := http.NewRequest("POST", s.base+"/v1/decide", strings.NewReader(`{"deliveries":[{"host":"tls.example"}]}`))
	if resp, err := noCert.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a connection without a client certificate was served: %d", resp.StatusCode)
	}
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := plain.Get(s.base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("a connection without a client certificate was served: %d", resp.StatusCode)
	}
}

// TestServeStoreDown: when the store fails, a decision is the Breaker's
// (send, or hold with --fail-closed) with the store's error, which shows
// no password of --redis-url.
func TestServeStoreDown(t *testing.T) {
	const password = "redis-pw-must-not-show"
	for _, failClosed := range []bool{false, true} {
		name, want := "fail-open", "send"
		args := []string{}
		if failClosed {
			name, want, args = "fail-closed", "hold", []string{"--fail-closed"}
		}
		t.Run(name, func(t *testing.T) {
			rs := redistest.MustStartWith(t, redistest.Options{Users: []string{"app on >" + password + " ~* +@all"}})
			t.Setenv(tokensEnv, "workers decide,report "+serveToken)
			s := startServe(t, append([]string{"--backend", "redis", "--redis-url", "redis://app:" + password + "@" + rs.Addr() + "/0", "--call-timeout", "2s"}, args...)...)
			if code, out := s.post(http.DefaultClient, "/v1/decide", serveToken, `{"deliveries":[{"host":"tls.example"}]}`); code != 200 || verdict(t, out)["error"] != nil {
				t.Fatalf("store up: %d %v", code, out)
			}
			rs.Close()
			code, out := s.post(http.DefaultClient, "/v1/decide", serveToken, `{"deliveries":[{"host":"tls.example"}]}`)
			v := verdict(t, out)
			msg, _ := v["error"].(string)
			if code != 200 || v["decision"] != want || msg == "" {
				t.Fatalf("store down: %d %v, want %s with the error", code, out, want)
			}
			code, out = s.post(http.DefaultClient, "/v1/outcomes", serveToken, `{"outcomes":[{"host":"tls.example","outcome":"failure"}]}`)
			res := out["results"].([]any)[0].(map[string]any)
			if code != 200 || res["recorded"] != false || res["error"] == nil {
				t.Fatalf("an outcome with the store down: %d %v", code, out)
			}
			s.shutdown()
			all := s.out.String() + s.errText.String() + msg + res["error"].(string)
			if strings.Contains(all, password) || strings.Contains(all, serveToken) {
				t.Errorf("a secret is shown:\n%s", all)
			}
		})
	}
}
