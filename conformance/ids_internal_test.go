package conformance

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReliedOnWaivable: every relied-on promise has its text and the
// meaning a waiver reports, and the Waive call a report suggests for it
// (gap's wording) is one checkWaivers accepts; an unknown name is refused.
func TestReliedOnWaivable(t *testing.T) {
	for p, meaning := range reliedOn {
		if meaning == "" || promiseText[p] == "" {
			t.Errorf("%q: no meaning or no text", string(p))
		}
		if err := checkWaivers(resolve([]func(*options){Waive(p, "a reason")})); err != nil {
			t.Errorf("Waive(%q) = %v", string(p), err)
		}
		if want, got := fmt.Sprintf("conformance.Waive(%q, ", string(p)), suggestWaive(p); got[:len(want)] != want {
			t.Errorf("the suggestion for %q is %s, want it to start %s", string(p), got, want)
		}
	}
	if checkWaivers(resolve([]func(*options){Waive("state-ttI", "a typo")})) == nil {
		t.Error("checkWaivers accepted a promise that does not exist")
	}
}

// TestAdaptersWaivable: ADAPTERS.md lists the promises Waive takes; the
// list, up to its sentence's end, is the suite's, no more and no fewer.
func TestAdaptersWaivable(t *testing.T) {
	md, err := os.ReadFile("ADAPTERS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(md), "<!-- waivable: held by TestAdaptersWaivable -->\n")
	if !ok {
		t.Fatal("ADAPTERS.md has no waivable list")
	}
	para, _, _ := strings.Cut(after, ".")
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(para, -1) {
		listed = append(listed, m[1])
	}
	var want []string
	for p := range reliedOn {
		want = append(want, string(p))
	}
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("ADAPTERS.md lists as waivable\n%v\nthe suite waives\n%v", listed, want)
	}
}
