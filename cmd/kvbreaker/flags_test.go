package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostCommandsBadFlags: bad flags and arguments exit 2 with a message
// that says what to change, before any connection.
func TestHostCommandsBadFlags(t *testing.T) {
	etcdArgs := []string{"--backend", "etcd", "--etcd-endpoints", "http://127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no-backend", []string{"check"}, "--backend is required (or $KVBREAKER_BACKEND): one of"},
		{"unknown-backend", []string{"check", "--backend", "zookeeper"}, `--backend is "zookeeper": want one of`},
		{"etcd-no-endpoints", []string{"check", "--backend", "etcd"}, "--backend etcd needs --etcd-endpoints (or $KVBREAKER_ETCD_ENDPOINTS)"},
		{"etcd-empty-endpoints", []string{"check", "--backend", "etcd", "--etcd-endpoints", " , "}, "--etcd-endpoints has no endpoint"},
		{"flag-of-other-backend", append([]string{"check", "--dynamodb-table", "t"}, etcdArgs...), "--dynamodb-table is a dynamodb flag, but --backend is etcd"},
		{"cert-without-key", append([]string{"check", "--etcd-cert", "c.pem"}, etcdArgs...), "--etcd-cert and --etcd-key go together"},
		{"key-without-cert", []string{"check", "--redis-key", "k.pem", "--backend", "redis", "--redis-url", "rediss://127.0.0.1:1"}, "--redis-cert and --redis-key go together"},
		{"etcd-cacert-http", append([]string{"check", "--etcd-cacert", "ca.pem"}, etcdArgs...), "--etcd-cacert, --etcd-cert and --etcd-key are for TLS: --etcd-endpoints must start with https://"},
		{"etcd-cacert-one-http", []string{"check", "--backend", "etcd", "--etcd-endpoints", "https://127.0.0.1:1,http://127.0.0.1:2", "--etcd-cacert", "ca.pem"}, "--etcd-endpoints must start with https://"},
		{"dynamodb-no-table", []string{"check", "--backend", "dynamodb"}, "--backend dynamodb needs --dynamodb-table"},
		{"dynamodb-bad-endpoint", []string{"check", "--backend", "dynamodb", "--dynamodb-table", "t", "--dynamodb-endpoint", "localhost:8000"}, "--dynamodb-endpoint is \"localhost:8000\": want an http:// or https:// URL"},
		{"cf-no-namespace", []string{"check", "--backend", "cloudflarekv", "--cf-account", "a"}, "--backend cloudflarekv needs --cf-namespace"},
		{"cf-bad-base-url", []string{"check", "--backend", "cloudflarekv", "--cf-account", "a", "--cf-namespace", "n", "--cf-base-url", "ftp://x"}, "--cf-base-url"},
		{"check-format", []string{"check", "--backend", "memory", "--format", "xml"}, `--format is "xml": want table or json`},
		{"check-timeout", []string{"check", "--backend", "memory", "--timeout", "0s"}, "--timeout must be positive"},
		{"check-stray", []string{"check", "--backend", "memory", "now"}, `unexpected argument "now"`},
		{"check-unknown-flag", []string{"check", "--bogus"}, "Error: unknown flag: --bogus"},
		{"negative-skew", []string{"check", "--backend", "memory", "--clock-skew", "-1s"}, "--clock-skew is -1s"},
		{"inspect-no-host", []string{"inspect", "--backend", "memory"}, "which host?"},
		{"inspect-two-hosts", []string{"inspect", "--backend", "memory", "a.example", "b.example"}, "one HOST at a time"},
		{"inspect-bad-host", []string{"inspect", "--backend", "memory", "https://"}, `HOST "https://"`},
		{"inspect-no-backend", []string{"inspect", "a.example"}, "--backend is required"},
		{"inspect-format", []string{"inspect", "--backend", "memory", "--format", "yaml", "a.example"}, `--format is "yaml"`},
		{"reset-no-yes", []string{"reset", "--backend", "memory", "a.example"}, "not resetting a.example without confirmation: add --yes"},
		{"reset-bad-flag", []string{"reset", "--backend", "memory", "--force", "a.example"}, "Error: unknown flag: --force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runT(t, tc.args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitUsage, out, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, errOut)
			}
			if out != "" {
				t.Errorf("stdout not empty: %s", out)
			}
		})
	}
}

// TestConnectionErrors: a missing token, a refused token, a missing table,
// unreadable TLS files and a dead endpoint exit 1 with a clear message and
// no credential in it.
func TestConnectionErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		token string // CLOUDFLARE_API_TOKEN ("-" to keep the server's)
		args  []string
		want  []string
	}{
		{"missing-token", "", append([]string{"check"}, connArgs("cloudflarekv")...), []string{"CLOUDFLARE_API_TOKEN is not set"}},
		{"missing-token-inspect", "", append([]string{"inspect"}, append(connArgs("cloudflarekv"), "a.example")...), []string{"CLOUDFLARE_API_TOKEN is not set"}},
		{"wrong-token", "wrong-token-must-not-show", append([]string{"inspect"}, append(connArgs("cloudflarekv"), "a.example")...), []string{"checking access to cloudflarekv namespace", "Authentication error"}},
		{"missing-table", "-", []string{"check", "--backend", "dynamodb", "--dynamodb-table", "no-such-table", "--dynamodb-endpoint", dynSrv.Endpoint}, []string{"dynamodb: table no-such-table does not exist", "ResourceNotFoundException", `"kvbreaker init"`}},
		{"dynamodb-dead", "-", []string{"list", "--backend", "dynamodb", "--dynamodb-table", dynTable, "--dynamodb-endpoint", "http://127.0.0.1:1"}, []string{"cannot reach dynamodb at http://127.0.0.1:1: connection refused"}},
		{"cloudflarekv-dead", "-", []string{"inspect", "--backend", "cloudflarekv", "--cf-account", "a", "--cf-namespace", "n", "--cf-base-url", "http://127.0.0.1:1/client/v4/", "a.example"}, []string{"cannot reach cloudflarekv at http://127.0.0.1:1/client/v4/: connection refused"}},
		{"cacert-missing", "-", []string{"inspect", "--backend", "etcd", "--etcd-endpoints", strings.Replace(etcdSrv.Endpoints()[0], "http://", "https://", 1), "--etcd-cacert", filepath.Join(dir, "nope.pem"), "a.example"}, []string{"--etcd-cacert", "no such file"}},
		{"cacert-not-pem", "-", []string{"inspect", "--backend", "etcd", "--etcd-endpoints", strings.Replace(etcdSrv.Endpoints()[0], "http://", "https://", 1), "--etcd-cacert", notPEM, "a.example"}, []string{"no PEM certificate"}},
		{"etcd-dead", "-", []string{"inspect", "--backend", "etcd", "--etcd-endpoints", "http://user:etcdpass-must-not-show@127.0.0.1:1", "--timeout", "1s", "a.example"}, []string{"Error: cannot reach etcd at http://127.0.0.1:1: connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.token != "-" {
				t.Setenv(TokenEnv, tc.token)
			}
			code, out, errOut := runT(t, tc.args...)
			if code != exitFail {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitFail, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestCredentialsOnSuccess: an etcd endpoint with user information works
// and the password shows nowhere (runT checks every output for it).
func TestCredentialsOnSuccess(t *testing.T) {
	ep := strings.Replace(etcdSrv.Endpoints()[0], "http://", "http://user:etcdpass-must-not-show@", 1)
	code, out, errOut := runT(t, "check", "--backend", "etcd", "--etcd-endpoints", ep, "--quick")
	if code != exitOK || !strings.Contains(out, "etcd at http://127.0.0.1:") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runT(t, append([]string{"inspect"}, append(connArgs("dynamodb"), "a.example")...)...)
	if code != exitOK || !strings.Contains(out, "closed") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestCommandHelp: each command's --help shows every backend's flags by
// example and exits 0.
func TestCommandHelp(t *testing.T) {
	common := []string{"--etcd-endpoints https://", "--etcd-cacert", "--dynamodb-table", "AWS_REGION", "AWS_PROFILE", "--cf-account", "CLOUDFLARE_API_TOKEN", "--cf-base-url", "Examples:", "--prefix",
		"KVBREAKER_BACKEND", "KVBREAKER_ETCD_ENDPOINTS", "KVBREAKER_DYNAMODB_TABLE", "KVBREAKER_DYNAMODB_ENDPOINT", "KVBREAKER_CLOUDFLARE_ACCOUNT_ID", "KVBREAKER_PREFIX", "[$KVBREAKER_ETCD_ENDPOINTS]"}
	for cmd, extra := range map[string][]string{
		"check":   {"kvbreaker check --backend NAME", "--quick", "--timeout", "TTLMargin", "exit code is 1"},
		"inspect": {"kvbreaker inspect --backend NAME", "HOST", "kvbreaker.HostKey", "--format"},
		"reset":   {"kvbreaker reset --backend NAME", "--yes"},
		"list":    {"kvbreaker list --backend NAME", "--state", "--limit", "--cursor", "--all", "driver.Lister"},
	} {
		t.Run(cmd, func(t *testing.T) {
			code, out, errOut := runT(t, cmd, "--help")
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q: help goes to stdout with exit 0", code, errOut)
			}
			for _, w := range append(common, extra...) {
				if !strings.Contains(out, w) {
					t.Errorf("%s --help lacks %q:\n%s", cmd, w, out+errOut)
				}
			}
		})
	}
	code, out, _ := runT(t, "--help")
	for _, w := range []string{"check", "inspect", "reset", "simulate", "list", "completion"} {
		if code != exitOK || !strings.Contains(out, "\n  "+w+" ") {
			t.Errorf("--help does not list %s:\n%s", w, out)
		}
	}
}
