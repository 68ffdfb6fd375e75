package main

import (
	"strconv"
	"strings"

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

// wrap fills text into lines of at most width characters, ending in a
// newline.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(text) {
		if i > 0 && n+1+len(w) > width {
			b.WriteString("\n")
			n = 0
		} else if i > 0 {
			b.WriteString(" ")
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String() + "\n"
}

// joinAnd joins s with commas, and " and " before its last item.
func joinAnd(s []string) string { return joinLast(s, " and ") }

// joinLast joins s with commas, and last before its last item.
func joinLast(s []string, last string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + last + s[len(s)-1]
}

// boolString is a boolean flag kept as "true" or "" so that a table of
// string flags (the backends' connection flags) can hold it: validate
// tells a misplaced one from an unset one, and clears one that came from
// the environment for another backend.
type boolString struct{ p *string }

// String is called on a zero boolString too (pflag's test for a default).
func (b boolString) String() string { return strconv.FormatBool(b.p != nil && *b.p != "") }
func (boolString) Type() string     { return "bool" }
func (boolString) IsBoolFlag() bool { return true }

func (b boolString) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err == nil {
		*b.p = map[bool]string{true: "true"}[v]
	}
	return err
}
