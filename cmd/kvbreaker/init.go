package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvbreaker/kvbreaker/internal/output"
)

// initLong is init's --help: what init creates (each backend's creates)
// and prints.
func initLong() string {
	var creates, prints []string
	for _, d := range registry {
		if d.create != nil {
			creates = append(creates, d.creates)
			prints = append(prints, d.prints)
		}
	}
	return wrap("Creates what a store needs before a fleet (or list, inspect, reset and check) can use it: "+joinAnd(creates)+
		". It is idempotent: what exists is left as it is (read once to check its columns) and init says so. "+
		titles(func(d *backendDesc) bool { return d.create == nil })+" need nothing created; init says so and exits 0.", 76) + "\n" +
		wrap("--print connects to nothing and prints what init would run, for a database owner or a migration tool: "+strings.Join(prints, "; ")+".", 76) + "\n" +
		backendFlagsHelp
}

type initFlags struct {
	bf      backendFlags
	format  string
	timeout time.Duration
	print   bool
}

func newInitCmd() *cobra.Command {
	var f initFlags
	cmd := &cobra.Command{
		Use:     "init --backend " + strings.Join(creators(func(d *backendDesc) string { return d.name }), "|") + " [connection flags] [--print]",
		Short:   "create the table " + joinLast(creators(func(d *backendDesc) string { return d.title }), " or ") + " needs (or print its SQL / AWS CLI commands)",
		Long:    initLong(),
		Example: examples("init", ""),
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInit(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.bf.register(fs)
	fs.StringVar(&f.format, "format", "table", "output format: table or json (not with --print)")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up after this long (a new DynamoDB table takes seconds to become ACTIVE)")
	fs.BoolVar(&f.print, "print", false, "print the SQL or AWS CLI commands instead of running them; connects to nothing")
	completeFlags(cmd)
	return cmd
}

// creators maps the backends that need something created by name.
func creators(name func(*backendDesc) string) []string {
	var out []string
	for _, d := range registry {
		if d.create != nil {
			out = append(out, name(d))
		}
	}
	return out
}

// initOutput is init's JSON.
type initOutput struct {
	Backend string `json:"backend"`
	Target  string `json:"target"`
	Table   string `json:"table"`
	// Created is false when the table existed already (or the backend
	// needs none).
	Created bool   `json:"created"`
	Message string `json:"message"`
}

func runInit(ctx context.Context, f *initFlags, stdout, stderr io.Writer) error {
	if err := f.bf.applyEnv(); err != nil {
		return err
	}
	if err := checkFormat(f.format); err != nil {
		return err
	}
	if f.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	if f.print {
		if f.format != "table" {
			return usagef("--print prints SQL or shell commands: drop --format")
		}
		return printInit(&f.bf, stdout, stderr)
	}
	if err := f.bf.validate(); err != nil {
		return err
	}
	var out initOutput
	if f.bf.desc.create == nil {
		out = initOutput{Backend: f.bf.backend, Message: f.bf.desc.noTableSays()}
	} else {
		ctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		f.bf.bound = fmt.Sprintf("--timeout %v", f.timeout)
		var err error
		if out, err = f.bf.desc.create(ctx, &f.bf); err != nil {
			return err
		}
	}
	if f.format == "json" {
		return output.JSON(stdout, out)
	}
	fmt.Fprintln(stdout, out.Message)
	return nil
}

// printInit prints what init would run, without connecting.
func printInit(bf *backendFlags, stdout, stderr io.Writer) error {
	bf.print = true
	if err := bf.validate(); err != nil {
		return err
	}
	if bf.desc.script != nil {
		script, err := bf.desc.script(bf)
		if err != nil {
			return usagef("%s: %v", bf.name(bf.desc.name+"-table"), err)
		}
		_, err = io.WriteString(stdout, script)
		return err
	}
	fmt.Fprintln(stderr, bf.desc.noTableSays())
	return nil
}
