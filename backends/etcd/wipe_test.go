package etcd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
)

// TestFollowSeesRestore: the member's data is restored from a copy taken
// before a write (an operator restoring a backup of the data directory),
// and the server comes back at the same address at an older revision,
// without the write. The feed must say Lost and resynchronise to the
// restored keys; no Synced whose At is after the restore may vouch for the
// write the server no longer has. So on demand, the feed beating for the
// fleet all along (the beats' revisions name another history after the
// restore).
func TestFollowSeesRestore(t *testing.T) {
	for _, demand := range []bool{false, true} {
		name := "follow"
		if demand {
			name = "on demand"
		}
		t.Run(name, func(t *testing.T) { testFollowSeesRestore(t, demand) })
	}
}

func testFollowSeesRestore(t *testing.T, demand bool) {
	noLeaks(t)
	srv := etcdtest.MustStart(t)
	ctx := t.Context()
	cli := newClientOf(t, srv)
	st, err := etcd.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := etcd.New(newClientOf(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	prefix := uniquePrefix(t)
	if _, err := writer.CompareAndSwap(ctx, prefix+"before", driver.NoVersion, []byte("1"), time.Hour); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "data")
	srv.Stop()
	if out, err := exec.Command("cp", "-a", srv.DataDir(), backup).CombinedOutput(); err != nil {
		t.Fatalf("copying the data directory: %v: %s", err, out)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}

	f := followOn(t, st, prefix, nil, demand)
	m := &mirror{}
	f.until(t, m, "the snapshot", equalsStore(t, cli, prefix))
	const gone = "after"
	wctx, cancel := context.WithTimeout(ctx, feedWait)
	defer cancel()
	if _, err := writer.CompareAndSwap(wctx, prefix+gone, driver.NoVersion, []byte("2"), time.Hour); err != nil {
		t.Fatal(err)
	}
	f.until(t, m, "the write", func(m *mirror) bool { _, ok := m.keys[prefix+gone]; return ok })

	srv.Stop()
	if err := os.RemoveAll(srv.DataDir()); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", backup, srv.DataDir()).CombinedOutput(); err != nil {
		t.Fatalf("restoring the data directory: %v: %s", err, out)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	if _, ok := stored(t, cli, prefix)[prefix+gone]; ok {
		t.Fatalf("the restored server still holds %s: the copy was taken after it", gone)
	}
	deadline := time.After(feedWait)
	for {
		select {
		case a := <-f.ch:
			m.apply(t, a.Change)
			if a.Kind != driver.ChangeSynced || !m.healthy || !a.At.After(restored) {
				continue
			}
			if _, ok := m.keys[prefix+gone]; ok {
				t.Fatalf("Synced{At: %v after the restore} with %s, which the restored server lacks, still in the mirror (lost %v)", a.At.Sub(restored), gone, m.lost)
			}
			if len(m.lost) == 0 {
				t.Fatalf("the restore reached the mirror without a Lost: %v", m.keys)
			}
			if !equalsStore(t, cli, prefix)(m) {
				continue
			}
			t.Logf("seen as Lost (%v); the mirror holds the restored keys %v", m.lost, m.keys)
			return
		case err := <-f.done:
			t.Fatalf("Follow returned %v", err)
		case <-deadline:
			t.Fatalf("no Synced after the restore within %v (mirror %v, lost %v)", feedWait, m.keys, m.lost)
		}
	}
}
