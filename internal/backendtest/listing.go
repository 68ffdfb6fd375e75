package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// LiveListing checks List over st, a store under a prefix no other test
// uses: five live keys come in byte order over pages of two (ListAll
// checks each page and cursor), a key whose TTL has passed and a deleted
// key are left out, and a prefix lists its keys alone. short is a TTL that has passed once elapse returns: a microsecond on a
// server's clock, which has passed by the listing (elapse nil), or a
// millisecond and an advance of the store's fake clock.
func LiveListing(t testing.TB, st ListStore, short time.Duration, elapse func()) {
	t.Helper()
	ctx := t.Context()
	for _, k := range []string{"a.example", "b.example", "c.example", "d.example", "x/other"} {
		if _, err := st.CompareAndSwap(ctx, k, driver.NoVersion, []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CompareAndSwap(ctx, "e.example", driver.NoVersion, []byte("v"), short); err != nil {
		t.Fatal(err)
	}
	_, v, err := st.Get(ctx, "c.example")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CompareAndDelete(ctx, "c.example", v); err != nil {
		t.Fatal(err)
	}
	if elapse != nil {
		elapse()
	}
	keys, _ := ListAll(t, st, "", 2)
	if got := fmt.Sprint(keys); got != "[a.example b.example d.example x/other]" {
		t.Errorf("listed %s, want [a.example b.example d.example x/other]", got)
	}
	keys, _, err = st.List(ctx, "x/", "", 10)
	if err != nil || fmt.Sprint(keys) != "[x/other]" {
		t.Errorf("List(x/) = %v, %v; want [x/other]", keys, err)
	}
}
