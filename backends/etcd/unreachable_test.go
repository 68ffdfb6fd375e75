package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
)

// TestStoreCallsUnreachable: every call of a Store whose server was killed
// (its port now refuses connections) ends with its context and an
// *driver.UnreachableError naming the endpoint and the refusal, matching both
// driver.ErrUnreachable and the context's error, as Dial's does and driver's doc
// promises; a paused server (which accepts connections) is not called
// unreachable.
func TestStoreCallsUnreachable(t *testing.T) {
	srv := etcdtest.MustStart(t)
	store, err := etcd.Dial(t.Context(), srv.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	check := func(state string, wantUnreachable bool) {
		t.Helper()
		for op, call := range storeOps(store, "down.example") {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			err := call(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(errString(err), "etcd: "+op) {
				t.Errorf("%s with the server %s: %v; want etcd: %s…, the context's deadline", op, state, err, op)
				continue
			}
			ue, ok := errors.AsType[*driver.UnreachableError](err)
			if ok != wantUnreachable || ok != errors.Is(err, driver.ErrUnreachable) {
				t.Errorf("%s with the server %s: %v; unreachable %v, want %v", op, state, err, ok, wantUnreachable)
				continue
			}
			if ok && (len(ue.Endpoints) != 1 || ue.Endpoints[0] != srv.Endpoints()[0] || ue.Reason != "connection refused") {
				t.Errorf("%s with the server %s: cause %+v; want %s refused", op, state, ue, srv.Endpoints()[0])
			}
		}
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	check("paused", false)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	check("killed", true)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
