package kvbreaker_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// commitLike matches what a doc would pin a commit by: 7 to 40 hex
// digits holding a letter and a digit (a seed such as 8207150 is digits
// alone; a pseudo-version's hash follows a dash and a timestamp).
var commitLike = regexp.MustCompile(`(?:^|[^-0-9A-Za-z])([0-9a-f]{7,40})(?:$|[^0-9A-Za-z])`)

func pinsIn(text string) []string {
	var pins []string
	for _, m := range commitLike.FindAllStringSubmatch(text, -1) {
		h := m[1]
		if strings.ContainsAny(h, "abcdef") && strings.ContainsAny(h, "0123456789") {
			pins = append(pins, h)
		}
	}
	return pins
}

// TestDocsPinNoCommit holds the rule that a doc states what is, not the
// history of how it came to be: a commit is named in CHANGELOG.md alone,
// so a comparison that needs its base names it there.
func TestDocsPinNoCommit(t *testing.T) {
	// The negative control: the pattern finds a pin where docs used to have one.
	if got := pinsIn(`"before" is commit 1666b90 built with`); len(got) != 1 {
		t.Fatalf("pinsIn found %v in a pinned sentence, want [1666b90]", got)
	}
	if got := pinsIn("golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da, seed 8207150"); len(got) != 0 {
		t.Fatalf("pinsIn found %v in a pseudo-version and a seed, want none", got)
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") || path == "CHANGELOG.md" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, pin := range pinsIn(string(b)) {
			t.Errorf("%s names %s: a commit belongs in CHANGELOG.md (a benchmark's base under \"Benchmark bases\")", path, pin)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
