package nats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/wipetest"
)

// TestFollowSeesWipes: an operator removes, with JetStream's own API on a
// connection of theirs, messages a feed has delivered: the stream purged,
// one subject purged, one message deleted, the bucket deleted and created
// again. Every time the feed reports it (Lost, or a Delete of the key)
// before any Synced whose At is after the removal, so a mirror never
// vouches for a record the store no longer has.
func TestFollowSeesWipes(t *testing.T) {
	wipes := map[string]func(ctx context.Context, js jetstream.JetStream, bucket, subject string) error{
		"stream purged": func(ctx context.Context, js jetstream.JetStream, bucket, _ string) error {
			st, err := js.Stream(ctx, "KV_"+bucket)
			if err != nil {
				return err
			}
			return st.Purge(ctx)
		},
		"subject purged": func(ctx context.Context, js jetstream.JetStream, bucket, subject string) error {
			st, err := js.Stream(ctx, "KV_"+bucket)
			if err != nil {
				return err
			}
			return st.Purge(ctx, jetstream.WithPurgeSubject(subject))
		},
		"message deleted": func(ctx context.Context, js jetstream.JetStream, bucket, subject string) error {
			st, err := js.Stream(ctx, "KV_"+bucket)
			if err != nil {
				return err
			}
			m, err := st.GetLastMsgForSubject(ctx, subject)
			if err != nil {
				return err
			}
			return st.DeleteMsg(ctx, m.Sequence)
		},
		"bucket created again": func(ctx context.Context, js jetstream.JetStream, bucket, _ string) error {
			kv, err := js.KeyValue(ctx, bucket)
			if err != nil {
				return err
			}
			st, err := kv.Status(ctx)
			if err != nil {
				return err
			}
			cfg := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
			if err := js.DeleteKeyValue(ctx, bucket); err != nil {
				return err
			}
			_, err = js.CreateStream(ctx, cfg)
			return err
		},
	}
	n := 0
	for _, demand := range []bool{false, true} {
		for name, wipe := range wipes {
			n++
			deletable := name == "message deleted"
			if demand {
				name += ", on demand"
			}
			runWipe(t, fmt.Sprintf("kvbreaker_wipe_%d", n), name, wipe, deletable, demand)
		}
	}
}

// runWipe is TestFollowSeesWipes for one wipe on a bucket of its own: one
// Follow, or (demand) two FollowDemand feeds over stores of their own,
// whose beats the fleet shares and whose wipe check rides on them.
func runWipe(t *testing.T, bucketName, name string, wipe func(ctx context.Context, js jetstream.JetStream, bucket, subject string) error, deletable, demand bool) {
	{
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			js, err := jetstream.New(connect(t, server.URL()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), bucketName) })
			if deletable {
				// A bucket's stream denies deleting a message, for good;
				// an operator who wants to can make the bucket's stream
				// without that.
				if err := createDeletable(ctx, js, bucketName); err != nil {
					t.Fatal(err)
				}
			}
			st, err := kvnats.New(ctx, connect(t, server.URL()), bucketName)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			const key = "wiped/host.example"
			for _, k := range []string{key, "wiped/other.example"} {
				if _, err := st.CompareAndSwap(ctx, k, driver.NoVersion, []byte("record"), time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			var feeds []*backendtest.Feed
			if demand {
				for range 2 {
					own, err := kvnats.New(ctx, connect(t, server.URL()), bucketName)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { own.Close() })
					feeds = append(feeds, backendtest.FollowDemand(t, ctx, own, "wiped/", 100*time.Millisecond))
				}
			} else {
				feeds = append(feeds, backendtest.Follow(t, ctx, st, "wiped/", 100*time.Millisecond))
			}
			for _, f := range feeds {
				f.AwaitSyncedWith(t, key)
			}
			if err := wipe(ctx, js, bucketName, st.Subject(key)); err != nil {
				t.Fatalf("the wipe: %v", err)
			}
			wiped := time.Now()
			for i, f := range feeds {
				c := f.AwaitWipeSeen(t, key, wiped)
				t.Logf("feed %d: seen as %v (%v)", i, c.Kind, c.Err)
			}
		})
	}
}

// createDeletable creates bucket's stream as a KV bucket of one revision
// per key and per-message TTLs, but allowing a message's deletion.
func createDeletable(ctx context.Context, js jetstream.JetStream, bucket string) error {
	tmp := bucket + "_model"
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: tmp, History: 1, LimitMarkerTTL: time.Minute})
	if err != nil {
		return err
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	cfg := status.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	if err := js.DeleteKeyValue(ctx, tmp); err != nil {
		return err
	}
	cfg.Name, cfg.Subjects, cfg.DenyDelete = "KV_"+bucket, []string{"$KV." + bucket + ".>"}, false
	_, err = js.CreateStream(ctx, cfg)
	return err
}

// TestFollowWipeBlind: follow-wipe's negative control on the real server: the
// same harness, its feeds blind to what the purge and the bucket's
// re-creation make them say, fails the case.
func TestFollowWipeBlind(t *testing.T) {
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}
	wipetest.CheckBlindFails(t, h.(*harness))
}
