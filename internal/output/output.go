// Package output is how every kvbreaker subcommand writes: one JSON style
// and one test for a watching person, shared by the command and by
// simulate's own package (which make demo builds without the command).
package output

import (
	"encoding/json"
	"io"
	"os"
	"time"
)

// JSON writes v as indented JSON: the one JSON style of every command
// (durations in milliseconds with "_ms" in the field name, null for not
// applicable, prose only in "message", "note", "detail" or "notes").
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// IsTerminal reports whether w is a terminal (a character device), for
// progress that only a person watching should see.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Ms is d in milliseconds, the unit of every duration in the JSON.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
