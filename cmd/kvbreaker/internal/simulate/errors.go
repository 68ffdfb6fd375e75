package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// UsageError is a bad flag value: the command exits 2 with a hint to its
// --help.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, a ...any) error { return &UsageError{fmt.Sprintf(format, a...)} }

// checkFormat accepts table or json, with the message every command of
// kvbreaker gives.
func checkFormat(format string) error {
	if format != "table" && format != "json" {
		return usagef("--format is %q: want table or json", format)
	}
	return nil
}

// writeJSON writes v as indented JSON, the style of every command's
// --format json.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// isTerminal reports whether w is a terminal (a character device): the
// progress line is for a person watching, not for a log or a pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ms is d in milliseconds, the unit of every duration in the JSON.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
