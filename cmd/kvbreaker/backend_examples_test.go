package main

import (
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestExamplesAreCommandLines: every line of a command's examples that
// names a backend (its continuations joined, what a pipe feeds cut off) is
// a command line the command accepts up to connecting: its flags parse,
// and with the variables the line sets first in the environment, the
// backend's flags pass validate. check, list, inspect and reset show every
// backend, init each with a table to make. A line with a flag's value
// mistyped fails the same check. An init --print line is checked as init
// --print checks it, which connects to nothing.
func TestExamplesAreCommandLines(t *testing.T) {
	shown := map[string][]string{}
	for _, cmd := range newRoot(func() {}).Commands() {
		lines := strings.Split(strings.ReplaceAll(cmd.Example, " \\\n", " "), "\n")
		for _, line := range lines {
			if !strings.Contains(line, " --backend ") {
				continue
			}
			t.Run(cmd.Name()+"/"+strings.TrimSpace(line), func(t *testing.T) {
				backend, err := checkExample(t, cmd.Name(), line)
				if err != nil {
					t.Errorf("%s's example %q: %v", cmd.Name(), strings.TrimSpace(line), err)
				}
				shown[cmd.Name()] = append(shown[cmd.Name()], backend)
			})
		}
	}
	for _, cmd := range []string{"check", "list", "inspect", "reset", "init"} {
		for _, d := range registry {
			if (cmd != "init" || d.create != nil) && !slices.Contains(shown[cmd], d.name) {
				t.Errorf("%s's examples show no line for --backend %s", cmd, d.name)
			}
		}
	}

	// The negative control: the check refuses a value validate refuses.
	if _, err := checkExample(t, "check", "  kvbreaker check --backend etcd --etcd-endpoints etcd-1:2379"); err == nil {
		t.Error("an example whose --etcd-endpoints is no URL passed")
	}
	if _, err := checkExample(t, "init", "  kvbreaker init --backend postgres --postgres-table 'no table' --print"); err == nil {
		t.Error("an example of init --print with a table name Schema refuses passed")
	}
}

// checkExample parses line, an example of the command name, as a shell
// would (quotes, leading NAME=value assignments, which it sets with
// t.Setenv), and returns its --backend and validate's error, or with
// --print what init --print says of it.
func checkExample(t *testing.T, name, line string) (string, error) {
	cmd, _, err := newRoot(func() {}).Find([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ = strings.Cut(line, " | ")
	var words []string
	for _, m := range regexp.MustCompile(`(?:[^\s'"]+|'[^']*'|"[^"]*")+`).FindAllString(line, -1) {
		words = append(words, strings.NewReplacer(`'`, "", `"`, "").Replace(m))
	}
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
		name, value, _ := strings.Cut(words[0], "=")
		t.Setenv(name, value)
		words = words[1:]
	}
	if len(words) < 2 || words[0] != "kvbreaker" || words[1] != cmd.Name() {
		t.Fatalf("%q is not a line of kvbreaker %s", line, cmd.Name())
	}
	var f backendFlags
	fs := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	f.register(fs)
	// The command's own flags (--quick, --yes, --tokens-file) beside them.
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if fs.Lookup(fl.Name) == nil {
			fs.AddFlag(fl)
		}
	})
	if err := fs.Parse(words[2:]); err != nil {
		return "", err
	}
	if err := f.applyEnv(); err != nil {
		return f.backend, err
	}
	if p := fs.Lookup("print"); p != nil && p.Value.String() == "true" {
		return f.backend, printInit(&f, io.Discard, io.Discard)
	}
	return f.backend, f.validate()
}
