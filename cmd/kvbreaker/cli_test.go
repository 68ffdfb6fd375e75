package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpOnStdout: every command's --help (and "help CMD") goes to stdout
// with exit 0 and nothing on stderr: the flag package's default prints it
// to stderr, where `| less` loses it.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"help", "check"},
		{"simulate", "--help"}, {"check", "--help"}, {"inspect", "--help"}, {"reset", "--help"}, {"list", "--help"},
		{"completion", "--help"},
	} {
		code, out, errOut := runT(t, args...)
		if code != exitOK || errOut != "" || !strings.Contains(out, "Usage:") || !strings.Contains(out, "--help") {
			t.Errorf("kvbreaker %s: exit %d, stderr %q, stdout:\n%.300s", strings.Join(args, " "), code, errOut, out)
		}
	}
}

// TestVersion: --version prints the build's module version.
func TestVersion(t *testing.T) {
	code, out, errOut := runT(t, "--version")
	if code != exitOK || errOut != "" || out != "kvbreaker "+version()+"\n" || !strings.Contains(out, "go1.") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A built binary carries its VCS revision where go build stamps it
	// (a clone: a pseudo-version or (devel), then the commit), else says
	// it has none (-buildvcs=false, a git worktree).
	bin := buildBinary(t)
	b, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(b), "kvbreaker ") || !strings.Contains(string(b), " (commit ") && !strings.HasPrefix(string(b), "kvbreaker (devel) (no VCS revision") {
		t.Fatalf("%s --version: %q, %v", bin, b, err)
	}
	t.Logf("built binary: %s", strings.TrimSpace(string(b)))
}

// TestUsageErrorsAreShort: every usage error is two lines on stderr
// ("Error: ..." and "Run 'kvbreaker CMD --help' for usage."), exit 2,
// nothing on stdout, flags spelled --flag. The flag package's default
// prints the whole flag list for an unknown flag, burying the error, and
// spells it "-bogus".
func TestUsageErrorsAreShort(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		cmd, want string
	}{
		{[]string{"check", "--x"}, "kvbreaker check", "unknown flag: --x"},
		{[]string{"simulate", "--bogus"}, "kvbreaker simulate", "unknown flag: --bogus"},
		{[]string{"list", "--backend", "memory", "--limit", "many"}, "kvbreaker list", `invalid argument "many" for "--limit" flag`},
		{[]string{"inspect", "--backend", "memory", "--timeout", "soon", "a.example"}, "kvbreaker inspect", `invalid argument "soon" for "--timeout" flag`},
		{[]string{"reset", "--force", "a.example"}, "kvbreaker reset", "unknown flag: --force"},
		{[]string{"frobnicate"}, "kvbreaker", `unknown command "frobnicate"`},
		{[]string{"check"}, "kvbreaker check", "--backend is required"},
		{[]string{"list", "--backend", "memory", "--state", "ajar"}, "kvbreaker list", `--state is "ajar": want open, half-open or closed`},
		{[]string{"list", "--backend", "memory", "--limit", "0"}, "kvbreaker list", "--limit is 0: want 1 to 1000"},
		{[]string{"list", "--backend", "memory", "stray"}, "kvbreaker list", `unexpected argument "stray"`},
		{[]string{"inspect", "--backend", "memory"}, "kvbreaker inspect", "which host?"},
	} {
		code, out, errOut := runT(t, tc.args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != exitUsage || out != "" || len(lines) != 2 ||
			!strings.HasPrefix(lines[0], "Error: ") || !strings.Contains(lines[0], tc.want) ||
			lines[1] != "Run '"+tc.cmd+" --help' for usage." {
			t.Errorf("kvbreaker %s: exit %d (want %d), stdout %q, stderr:\n%s", strings.Join(tc.args, " "), code, exitUsage, out, errOut)
		}
	}
}

// TestCompletion: cobra's completion scripts for bash, zsh and fish, and
// the values it offers for --backend.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := runT(t, "completion", sh)
		if code != exitOK || !strings.Contains(out, "kvbreaker") || len(out) < 1000 {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", sh, code, len(out), errOut)
		}
	}
	code, out, _ := runT(t, "__complete", "list", "--backend", "")
	for _, b := range publicBackends {
		if code != exitOK || !strings.Contains(out, b+"\n") {
			t.Errorf("completing --backend lacks %s:\n%s", b, out)
		}
	}
}

// TestEnvironment: connection settings come from KVBREAKER_* when no flag
// gives them; a flag wins; another backend's variables are ignored; a bad
// value names its variable.
func TestEnvironment(t *testing.T) {
	t.Setenv("KVBREAKER_BACKEND", "etcd")
	t.Setenv("KVBREAKER_ETCD_ENDPOINTS", etcdSrv.Endpoints()[0])
	// Another backend's settings in the same shell: ignored.
	t.Setenv("KVBREAKER_DYNAMODB_TABLE", "not-used")
	code, out, errOut := runT(t, "inspect", "env.example")
	if code != exitOK || !strings.Contains(out, "state:             closed") {
		t.Fatalf("inspect from the environment: exit %d\n%s\n%s", code, out, errOut)
	}
	// The flag wins over a dead endpoint in the environment.
	t.Setenv("KVBREAKER_ETCD_ENDPOINTS", "http://127.0.0.1:1")
	if code, out, errOut := runT(t, "inspect", "--etcd-endpoints", etcdSrv.Endpoints()[0], "env.example"); code != exitOK {
		t.Fatalf("flag over environment: exit %d\n%s\n%s", code, out, errOut)
	}
	// Negative control: without the flag, the environment's dead endpoint
	// is used.
	if code, _, errOut := runT(t, "inspect", "env.example"); code != exitFail || !strings.Contains(errOut, "cannot reach etcd at http://127.0.0.1:1") {
		t.Fatalf("environment endpoint not used: exit %d\n%s", code, errOut)
	}
	t.Setenv("KVBREAKER_CLOCK_SKEW", "a while")
	if code, _, errOut := runT(t, "inspect", "env.example"); code != exitUsage || !strings.Contains(errOut, "KVBREAKER_CLOCK_SKEW") {
		t.Fatalf("bad environment value: exit %d\n%s", code, errOut)
	}
}

// buildBinary builds the command into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kvbreaker")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
