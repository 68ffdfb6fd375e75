package kvbreaker_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
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

// TestREADMELinks: every relative link of README.md and docs/*.md names a
// file of the repository, and an #anchor a heading of its page, so moving a
// section cannot leave a dead link.
func TestREADMELinks(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(markdownProse(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			page := f
			if path != "" {
				page = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				if _, err := os.Stat(page); err != nil {
					t.Errorf("%s: link %s: %v", f, target, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			content, err := os.ReadFile(page)
			if err != nil {
				t.Errorf("%s: link %s: %v", f, target, err)
				continue
			}
			if !hasAnchor(string(content), anchor) {
				t.Errorf("%s: link %s: %s has no heading with anchor #%s", f, target, page, anchor)
			}
		}
	}
}

// markdownProse returns text without its fenced blocks and code spans.
func markdownProse(text string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line)
		}
	}
	return regexp.MustCompile("`[^`]*`").ReplaceAllString(b.String(), "")
}

// hasAnchor reports whether a Markdown text has a heading whose GitHub anchor
// is anchor: lower case, spaces as '-', other punctuation but '-' and '_'
// dropped.
func hasAnchor(text, anchor string) bool {
	for line := range strings.Lines(text) {
		heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
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
