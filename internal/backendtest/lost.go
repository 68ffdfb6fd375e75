package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
)

// LostAnswers checks a store that resends a write whose answer was lost
// and recognises the write as its own (MySQL, PostgreSQL): a create, a
// compare-and-swap and a compare-and-delete applied by the server, whose
// answers p drops, succeed with the version the first attempt got. st
// goes through p.
func LostAnswers(t *testing.T, st driver.Store, p *faultproxy.Proxy) {
	t.Helper()
	ctx := t.Context()
	get := func(key string) driver.Version {
		t.Helper()
		_, v, err := st.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get(%q) = %v", key, err)
		}
		return v
	}
	v1, err := st.CompareAndSwap(ctx, "a.example", driver.NoVersion, []byte("v1"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, lose := range []string{"create", "swap", "delete"} {
		if err := p.DropNextAnswer(ctx); err != nil {
			t.Fatal(err)
		}
		var v driver.Version
		switch lose {
		case "create":
			v, err = st.CompareAndSwap(ctx, "b.example", driver.NoVersion, []byte("b"), time.Minute)
		case "swap":
			v, err = st.CompareAndSwap(ctx, "a.example", v1, []byte("v2"), time.Minute)
		case "delete":
			err = st.CompareAndDelete(ctx, "b.example", get("b.example"))
		}
		if err != nil {
			t.Fatalf("%s whose answer was lost = %v, want success", lose, err)
		}
		switch lose {
		case "create", "swap":
			key := map[string]string{"create": "b.example", "swap": "a.example"}[lose]
			if got := get(key); got != v {
				t.Errorf("%s whose answer was lost returned version %d, Get says %d", lose, v, got)
			}
		case "delete":
			if _, _, err := st.Get(ctx, "b.example"); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Get after the delete = %v, want not found", err)
			}
		}
	}
	if s := p.Stats(); s.Dropped != 3 {
		t.Errorf("the proxy dropped %d answers, want 3", s.Dropped)
	}
}
