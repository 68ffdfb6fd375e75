package main

import (
	"encoding/json"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// completeFlags offers values for the flags that have a fixed set of them
// to shell completion ("kvbreaker completion bash|zsh|fish").
func completeFlags(cmd *cobra.Command) {
	fixed := func(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return values, cobra.ShellCompDirectiveNoFileComp
		}
	}
	for name, values := range map[string][]string{
		"backend": publicBackends,
		"format":  {"table", "json"},
		"state":   {"open", "half-open", "closed"},
	} {
		if cmd.Flags().Lookup(name) != nil {
			_ = cmd.RegisterFlagCompletionFunc(name, fixed(values...))
		}
	}
}

// writeJSON writes v as indented JSON: the one JSON style of every command
// (durations in milliseconds with "_ms" in the field name, null for not
// applicable, prose only in "message", "note", "detail" or "notes").
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// isTerminal reports whether w is a terminal (a character device), for
// progress that only a person watching should see.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
