package kvbreaker_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEExamples: the README's Go blocks marked in example_readme_test.go
// ("// README: <name>" … "// README: end") appear in README.md verbatim, so
// the code a reader copies is code that compiles and runs (as the Examples,
// with their output checked).
func TestREADMEExamples(t *testing.T) {
	src, err := os.ReadFile("example_readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(string(src))
	if len(blocks) < 2 {
		t.Fatalf("found %d README blocks in example_readme_test.go, want the \"use it\" and \"do\" blocks", len(blocks))
	}
	for name, code := range blocks {
		if !strings.Contains(string(readme), "```go\n"+code+"```\n") {
			t.Errorf("README.md lacks the %q block of example_readme_test.go, verbatim in a ```go block:\n%s", name, code)
		}
	}
}

// TestREADMELength: the README stays a first screen and a page, with the
// rest in docs/.
func TestREADMELength(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const limit = 200
	if n := strings.Count(string(readme), "\n"); n > limit {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page under docs/ and link it", n, limit)
	}
}

// readmeBlocks returns the marked blocks of src by name, one tab of
// indentation removed.
func readmeBlocks(src string) map[string]string {
	out := map[string]string{}
	var name string
	var b strings.Builder
	for line := range strings.Lines(src) {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "// README: end" && name != "":
			out[name] = b.String()
			name = ""
			b.Reset()
		case strings.HasPrefix(trimmed, "// README: "):
			name = strings.TrimPrefix(trimmed, "// README: ")
		case name != "":
			b.WriteString(strings.TrimPrefix(line, "\t"))
		}
	}
	return out
}
