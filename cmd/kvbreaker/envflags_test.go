package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestEnvFlags: a flag not given takes its variable's value, a flag given
// wins, an empty variable is no value, and two envFlags on one FlagSet
// (serve's connection and listener flags) each apply their own.
func TestEnvFlags(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var mine, theirs envFlags
	mine.fs, theirs.fs = fs, fs
	var a, b, c, d string
	fs.StringVar(&a, "a", "", mine.withEnv("a", "T_A", "flag a"))
	fs.StringVar(&b, "b", "", mine.withEnv("b", "T_B", "flag b"))
	fs.StringVar(&c, "c", "default", mine.withEnv("c", "T_C", "flag c"))
	fs.StringVar(&d, "d", "", theirs.withEnv("d", "T_D", "flag d"))
	t.Setenv("T_A", "from-env")
	t.Setenv("T_B", "from-env")
	t.Setenv("T_C", "")
	t.Setenv("T_D", "theirs")
	if err := fs.Parse([]string{"--b", "given"}); err != nil {
		t.Fatal(err)
	}
	if err := mine.applyEnv(); err != nil {
		t.Fatal(err)
	}
	if a != "from-env" || b != "given" || c != "default" || d != "" {
		t.Errorf("a=%q b=%q c=%q d=%q, want from-env, given, default and (not mine to apply) empty", a, b, c, d)
	}
	if got := mine.name("a"); got != "--a (from $T_A)" {
		t.Errorf("name(a) = %q", got)
	}
	if got := mine.name("b"); got != "--b" {
		t.Errorf("name(b) = %q, want --b: its value came from the command line", got)
	}
	if got := mine.flagAndEnv("c"); got != "--c (or $T_C)" {
		t.Errorf("flagAndEnv(c) = %q", got)
	}
	if u := fs.Lookup("a").Usage; u != "flag a [$T_A]" {
		t.Errorf("usage %q, want the variable shown", u)
	}
	if err := theirs.applyEnv(); err != nil || d != "theirs" {
		t.Errorf("theirs.applyEnv: %v, d=%q", err, d)
	}
}

// TestEnvFlagsRefused: a variable's value its flag refuses is a usage
// error naming the variable.
func TestEnvFlagsRefused(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	e := envFlags{fs: fs}
	var d time.Duration
	fs.DurationVar(&d, "wait", time.Second, e.withEnv("wait", "T_WAIT", "a wait"))
	t.Setenv("T_WAIT", "soon")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := e.applyEnv()
	if _, ok := err.(*usageError); !ok || !strings.Contains(err.Error(), "T_WAIT") {
		t.Errorf("applyEnv = %v, want a usage error naming T_WAIT", err)
	}
}

// TestListenFromEnv: serve's listener flags come from their variables,
// and a message about one names it.
func TestListenFromEnv(t *testing.T) {
	t.Setenv(tokensEnv, "w decide sec-0123456789abcdef-must-not-show")
	t.Setenv("KVBREAKER_SERVE_LISTEN", "8420")
	var o, e bytes.Buffer
	code, _ := executeErr(context.Background(), func() {}, []string{"serve", "--backend", "memory"}, &o, &e)
	if want := `--listen (from $KVBREAKER_SERVE_LISTEN) is "8420"`; code != exitUsage || !strings.Contains(e.String(), want) {
		t.Errorf("exit %d, want %d with %q:\n%s", code, exitUsage, want, e.String())
	}
	t.Setenv("KVBREAKER_SERVE_TLS_CERT", "x.pem")
	t.Setenv("KVBREAKER_SERVE_LISTEN", "")
	e.Reset()
	code, _ = executeErr(context.Background(), func() {}, []string{"serve", "--backend", "memory"}, &o, &e)
	if want := "--tls-cert and --tls-key go together"; code != exitUsage || !strings.Contains(e.String(), want) {
		t.Errorf("with $KVBREAKER_SERVE_TLS_CERT alone: exit %d, want %d with %q:\n%s", code, exitUsage, want, e.String())
	}
}
