// Command kvbreaker is kvbreaker's command-line tool: simulate, check,
// inspect, reset, list and init. Each subcommand lives in its own file and is added
// to the root command in newRoot.
//
// Usage:
//
//	kvbreaker <command> [flags]
//
// Run "kvbreaker --help" for the list of commands and "kvbreaker <command>
// --help" for a command's flags.
//
// Exit codes: 0 success, 1 the work failed (or check found a broken promise,
// or list a key the store failed to read),
// 2 a usage error (unknown command or flag, bad value), 130 interrupted
// (Ctrl-C), as shells report a process killed by SIGINT.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
)

const (
	exitOK          = 0
	exitFail        = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	// The first Ctrl-C cancels ctx (check then deletes what it wrote); the
	// commands call stop once interrupted, so a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, stop, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command in-process without signal handling (tests).
func run(args []string, stdout, stderr io.Writer) int {
	return execute(context.Background(), func() {}, args, stdout, stderr)
}

// usageError is a problem with the command line: exit 2, with a hint to
// the command's --help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exitError ends the command with code after it has said why itself (its
// report on stdout, a line on stderr).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// execute builds the command tree, runs args and returns the exit code.
// stopSignals restores the default signal handling (a second Ctrl-C kills).
func execute(ctx context.Context, stopSignals func(), args []string, stdout, stderr io.Writer) int {
	code, _ := executeErr(ctx, stopSignals, args, stdout, stderr)
	return code
}

// executeErr is execute that also returns the command's error as it came
// (tests look for credentials in it). What it prints of the error has
// every credential of the command line and the environment replaced
// (commandSecrets), in case a library quoted one.
func executeErr(ctx context.Context, stopSignals func(), args []string, stdout, stderr io.Writer) (int, error) {
	root := newRoot(stopSignals)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK, nil
	}
	if ee, ok := errors.AsType[*exitError](err); ok {
		return ee.code, err
	}
	if cmd == nil {
		cmd = root
	}
	secrets := commandSecrets(cmd.Flags())
	if ue, ok := errors.AsType[*usageError](err); ok || isCobraUsage(err) {
		msg := err.Error()
		if ok {
			msg = ue.msg
		}
		fmt.Fprintf(stderr, "Error: %s\nRun '%s --help' for usage.\n", scrub(msg, secrets), cmd.CommandPath())
		return exitUsage, err
	}
	fmt.Fprintf(stderr, "Error: %s\n", scrub(err.Error(), secrets))
	return exitFail, err
}

// isCobraUsage recognises the usage errors cobra itself returns (an unknown
// command), which carry no type.
func isCobraUsage(err error) bool {
	msg := err.Error()
	return len(msg) > 16 && msg[:16] == "unknown command "
}

func newRoot(stopSignals func()) *cobra.Command {
	root := &cobra.Command{
		Use:   "kvbreaker",
		Short: "a fleet-wide, per-remote-host circuit breaker over a KV store",
		Long: wrap("kvbreaker is a fleet-wide, per-remote-host circuit breaker for outbound "+
			"delivery (webhooks, ActivityPub inboxes, mail relays). Many workers share one "+
			"small record per host in a key-value store you already run"+rootStores+".", 78),
		Example: `  kvbreaker simulate
  kvbreaker check --backend etcd --etcd-endpoints http://127.0.0.1:2379
  kvbreaker list --backend etcd --etcd-endpoints http://127.0.0.1:2379 --state open
  kvbreaker inspect --backend etcd --etcd-endpoints http://127.0.0.1:2379 example.com`,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("kvbreaker {{.Version}}\n")
	// A bad flag is a usage error: two lines, not the whole help.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err.Error()} })
	root.AddCommand(newSimulateCmd())
	root.AddCommand(storeCommands(stopSignals)...)
	return root
}

// version describes the build from its module information: the module
// version (a tag; a pseudo-version or "(devel)" for a build from a clone)
// and the VCS revision it was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module information)"
	}
	return versionOf(bi)
}

// versionOf is version's text for build information bi.
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	extra := bi.GoVersion
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "-dirty"
		}
		extra = "commit " + rev
		if at != "" {
			extra += " " + at
		}
		extra += ", " + bi.GoVersion
	} else if v == "(devel)" {
		// go run, -buildvcs=false, or a directory git does not stamp.
		extra = "no VCS revision: go run, -buildvcs=false or no .git directory; " + bi.GoVersion
	}
	return v + " (" + extra + ")"
}

// noArgs rejects positional arguments of a command that takes only flags.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q: %s takes only flags", args[0], cmd.Name())
	}
	return nil
}

// checkFormat accepts table or json.
func checkFormat(format string) error {
	if format != "table" && format != "json" {
		return usagef("--format is %q: want table or json", format)
	}
	return nil
}
