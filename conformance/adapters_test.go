package conformance_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
)

// A harness delegates AnswerDropper to the fault proxy, as ADAPTERS.md
// says: the two have one shape.
var _ conformance.AnswerDropper = (*faultproxy.Proxy)(nil)

// adaptersCompiled are the compiled files ADAPTERS.md's Go blocks are
// copied from, relative to this package.
var adaptersCompiled = []string{"example_test.go", "../backends/etcd/conformance_test.go", "../adapter/example_store_test.go"}

// TestAdaptersCodeCompiles: every ```go block of ADAPTERS.md is a copy of
// code that go test compiles (example_test.go for the harness, the etcd
// backend's profile check, and the example adapter in package adapter), so the page cannot show code that does
// not build. A block may sit at any depth there.
func TestAdaptersCodeCompiles(t *testing.T) {
	md, err := os.ReadFile("ADAPTERS.md")
	if err != nil {
		t.Fatal(err)
	}
	var compiled []string
	for _, f := range adaptersCompiled {
		b, err := os.ReadFile(filepath.FromSlash(f))
		if err != nil {
			t.Fatalf("%v (the test runs in the repository)", err)
		}
		compiled = append(compiled, string(b))
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(md), -1)
	if len(blocks) == 0 {
		t.Fatal("ADAPTERS.md has no ```go block")
	}
	for _, b := range blocks {
		code := dedent(b[1])
		found := false
		for _, c := range compiled {
			if containsIndented(c, code) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("this block of ADAPTERS.md is in none of %v; copy it from compiled code:\n%s", adaptersCompiled, b[1])
		}
	}
}

// dedent removes the leading tabs every non-empty line of s shares, and
// the trailing newline.
func dedent(s string) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	common := -1
	for _, l := range lines {
		if n := tabs(l); strings.TrimSpace(l) != "" && (common < 0 || n < common) {
			common = n
		}
	}
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = l[common:]
		}
	}
	return lines
}

func tabs(l string) int { return len(l) - len(strings.TrimLeft(l, "\t")) }

// containsIndented reports whether file holds block's lines in a row, each
// indented by the same number of extra tabs (blank lines match blank ones).
func containsIndented(file string, block []string) bool {
	lines := strings.Split(file, "\n")
	for i := 0; i+len(block) <= len(lines); i++ {
		depth := tabs(lines[i]) - tabs(block[0])
		if depth < 0 {
			continue
		}
		pad := strings.Repeat("\t", depth)
		ok := true
		for j, b := range block {
			got := lines[i+j]
			if strings.TrimSpace(b) == "" {
				ok = strings.TrimSpace(got) == ""
			} else {
				ok = got == pad+b
			}
			if !ok {
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestAdaptersHarnessReachesTheBackend: the harness ADAPTERS.md shows
// wraps every store in kvbreaker.Prefixed and still reports lifetimes
// (kvbreaker.Unprefixed), so the expiry at the StateTTL a Breaker writes
// is verified without waiting for it.
func TestAdaptersHarnessReachesTheBackend(t *testing.T) {
	t.Parallel()
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rep, err := measure(t, h, conformance.WithSkipSlow(true))
	if err != nil {
		t.Fatalf("%v\n%s", err, rep)
	}
	for _, r := range rep.Results {
		if r.Case != "expiry-at-state-ttl" && r.Case != "every-write-replaces-ttl" {
			continue
		}
		if r.Skipped != "" || len(r.NotVerified) > 0 || len(r.Problems) > 0 {
			t.Errorf("case %s through the prefixed harness: skipped %q, not verified %v, problems %v", r.Case, r.Skipped, r.NotVerified, r.Problems)
		}
	}
}
