// Command demo is `kvbreaker simulate` alone, the program make demo runs:
// the same flags and the same report as the full command's simulate,
// built without cobra and without any backend SDK, and in the root module
// outside the workspace (make demo sets GOWORK=off), so that a first run
// from empty caches downloads only the root module's requirements and
// spends its time on the simulation rather than on compiling. A leading "simulate" argument is accepted, so that the same
// command line works for both.
//
// Exit codes as kvbreaker's: 0 success, 1 the run failed, 2 a usage error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/kvbreaker/kvbreaker/internal/simulate"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "simulate" {
		args = args[1:]
	}
	var f simulate.Flags
	fs := pflag.NewFlagSet("kvbreaker simulate", pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed below
	f.Register(fs)
	wantHelp := fs.BoolP("help", "h", false, "help for simulate")
	err := fs.Parse(args)
	switch {
	case err == nil && *wantHelp:
		help(stdout, fs)
		return 0
	case err != nil:
		return usage(stderr, err.Error())
	case fs.NArg() > 0:
		return usage(stderr, fmt.Sprintf("unexpected argument %q: simulate takes only flags", fs.Arg(0)))
	}
	err = simulate.Run(&f, stdout, stderr)
	if ue, ok := errors.AsType[*simulate.UsageError](err); ok {
		return usage(stderr, ue.Msg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 1
	}
	return 0
}

func usage(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "Error: %s\nRun with --help for usage.\n", msg)
	return 2
}

// help is the full command's help for simulate, in its layout.
func help(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "%s\n%s\nUsage:\n  kvbreaker simulate [flags]\n\nExamples:\n%s\n\nFlags:\n%s", simulate.Long, simulate.Footer, simulate.Example, fs.FlagUsages())
}
