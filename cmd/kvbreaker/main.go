// Command kvbreaker is kvbreaker's command-line tool. Each subcommand lives
// in its own file and is listed in the commands table below.
//
// Usage:
//
//	kvbreaker <command> [flags]
//
// Run "kvbreaker --help" for the list of commands and "kvbreaker <command>
// --help" for a command's flags.
package main

import (
	"fmt"
	"io"
	"os"
)

// A command is one subcommand. run gets the arguments after the command's
// name and returns the process exit code: 0 on success, 1 when the work
// failed, 2 for a usage error (bad flags or arguments).
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands in the order --help shows them. To add
// one, write its run function in its own file (like simulate.go) and add a
// line here.
var commands = []command{
	{"simulate", "replay hours of fleet traffic in seconds and compare breaker models", runSimulate},
	{"check", "run the conformance checks against a live store and print what it keeps", runCheck},
	{"inspect", "show a remote host's circuit as the fleet stores it", runInspect},
	{"reset", "force-close a remote host's circuit (with --yes)", runReset},
}

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches args to a subcommand and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "kvbreaker: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `kvbreaker is a fleet-wide, per-remote-host circuit breaker for outbound
delivery (webhooks, ActivityPub inboxes, mail relays). Many workers share one
small record per host in a key-value store you already run (etcd, DynamoDB,
Cloudflare Workers KV, or memory).

Usage:
  kvbreaker <command> [flags]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "kvbreaker <command> --help" for a command's flags. Start with:
  kvbreaker simulate
  kvbreaker check --backend etcd --etcd-endpoints http://127.0.0.1:2379
  kvbreaker inspect --backend etcd --etcd-endpoints http://127.0.0.1:2379 example.com
`)
}
