package kvbreaker

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// TestAbandonedReachesObservers: an abandoned probe, released or not,
// reaches every composed observer's Abandon hook.
func TestAbandonedReachesObservers(t *testing.T) {
	var got []string
	rec := func(name string) *Observer {
		return &Observer{Abandon: func(_ context.Context, a AbandonInfo) {
			got = append(got, fmt.Sprintf("%s %s released=%v", name, a.Host, a.Released))
		}}
	}
	b, err := New(memory.New(), Settings{SkipClockCheck: true, Observer: ComposeObservers(rec("a"), rec("b"))})
	if err != nil {
		t.Fatal(err)
	}
	b.abandoned(t.Context(), "inbox.example", true)
	b.abandoned(t.Context(), "inbox.example", false)
	want := []string{"a inbox.example released=true", "b inbox.example released=true", "a inbox.example released=false", "b inbox.example released=false"}
	if !slices.Equal(got, want) {
		t.Errorf("Abandon hooks saw %q, want %q", got, want)
	}
	// Without a hook, nothing is called (and nothing panics).
	quiet, err := New(memory.New(), Settings{SkipClockCheck: true, Observer: &Observer{}})
	if err != nil {
		t.Fatal(err)
	}
	quiet.abandoned(t.Context(), "inbox.example", true)
}
