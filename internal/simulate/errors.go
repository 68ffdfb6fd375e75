package simulate

import (
	"fmt"
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
