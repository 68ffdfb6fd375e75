package main

import (
	"strings"
	"testing"
)

// failedCases returns the lines of check's table report that say what
// failed: a promise BROKEN in the table, each FAIL case with its problems,
// each INCONCLUSIVE case. A test prints them after the whole report, so a
// log that keeps only a failure's last lines (make flakes keeps 40) still
// names the case: the not-verified list comes after them and is longer.
func failedCases(report string) string {
	var b strings.Builder
	inFail := false
	for line := range strings.Lines(report) {
		switch {
		case strings.HasPrefix(line, "FAIL "):
			inFail = true
		case inFail && strings.HasPrefix(line, "     - "):
		case strings.HasPrefix(line, "INCONCLUSIVE "), strings.Contains(line, " BROKEN"):
			inFail = false
		default:
			inFail = false
			continue
		}
		b.WriteString(line)
	}
	if b.Len() == 0 {
		return "(the report names no failed case)\n"
	}
	return b.String()
}

// TestFailedCases: the lines that name a failure are kept, with a FAIL
// case's problems, and nothing else; a report without one says so.
func TestFailedCases(t *testing.T) {
	report := "PROMISE   DECLARED   MEASURED   RESULT\n" +
		"linearizable   yes   seen   ok\n" +
		"read-staleness   0s   12ms   BROKEN\n" +
		"\ncases: 40 passed, 3 skipped, 2 failed or inconclusive\n" +
		"FAIL read-staleness\n" +
		"     - read-staleness: a read 12ms stale\n" +
		"skip expiry: waits in real time (--quick)\n" +
		"     - not a problem of a FAIL case\n" +
		"INCONCLUSIVE fleet: the machine was too slow\n"
	want := "read-staleness   0s   12ms   BROKEN\n" +
		"FAIL read-staleness\n" +
		"     - read-staleness: a read 12ms stale\n" +
		"INCONCLUSIVE fleet: the machine was too slow\n"
	if got := failedCases(report); got != want {
		t.Errorf("failedCases =\n%s\nwant\n%s", got, want)
	}
	if got := failedCases("cases: 3 passed, 0 skipped, 0 failed or inconclusive\n"); !strings.Contains(got, "no failed case") {
		t.Errorf("failedCases of a clean report = %q", got)
	}
}
