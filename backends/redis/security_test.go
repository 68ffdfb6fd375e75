package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// aclPrefix is the key prefix the limited user may touch.
const aclPrefix = "fleet-a/"

// aclCommands are the commands a Store and its Follow run, as measured by
// TestACLCommandsNeeded (drop any one and exercise fails): the
// connection's handshake (HELLO, CLIENT SETNAME, CLIENT ID; Redis 7.0 has no CLIENT SETINFO, which go-redis sends and does without),
// Get (HMGET), the writes and reads of the scripts (EVALSHA, EVAL and the
// commands the scripts call, which Redis 7 checks against the user too),
// TIME (the clock), SCAN and HEXISTS (listing; SCAN for Follow's snapshot), and Follow's
// SUBSCRIBE, CLIENT TRACKING and PING, and FollowDemand's PUBLISH.
const aclCommands = "-@all +ping +client|setname +client|id +hmget +evalsha +eval" +
	" +get +hgetall +lrange +smembers +zrange +xrange +dump +type +hset +hdel +del +pexpire +pttl +time" +
	" +scan +hexists +subscribe +client|tracking +publish"

// aclUser is a user that may run aclCommands on keys under aclPrefix and
// receive invalidations (the __redis__:invalidate channel), nothing else.
const aclUser = "fleet-a on >fleet-a-password resetkeys ~" + aclPrefix + "* resetchannels &__redis__:invalidate " + aclCommands

// TestTLSAndLimitedACLUser: a Redis that speaks only TLS and requires a
// client certificate, reached through Dial with a rediss:// URL, an ACL
// user limited to one key prefix and the commands above, and
// WithTLSConfig: a fleet of Breakers (each its own connection) runs a
// circuit's life, the Store lists its keys, and Follow delivers a snapshot,
// a change and Synced. The same user is refused (NOPERM) a key outside its
// prefix, and a user without one of the commands fails the step that needs
// it.
func TestTLSAndLimitedACLUser(t *testing.T) {
	pki := tlstest.MustNew(t, "redis test CA")
	limited := strings.Replace(aclUser, "fleet-a ", "no-tracking ", 1)
	limited = strings.Replace(limited, " +client|tracking", "", 1)
	srv := redistest.MustStartWith(t, redistest.Options{TLS: pki, ClientCerts: true, Users: []string{aclUser, limited}})
	url := "rediss://fleet-a:fleet-a-password@" + srv.Addr() + "/0"
	dial := func(t *testing.T, url string) *redis.Store {
		t.Helper()
		s, err := redis.Dial(t.Context(), url, redis.WithTLSConfig(pki.ClientConfig()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}

	t.Run("fleet", func(t *testing.T) {
		var stores []driver.Store
		for range 8 {
			p, err := kvbreaker.Prefixed(dial(t, url), aclPrefix+"fleet/")
			if err != nil {
				t.Fatal(err)
			}
			stores = append(stores, p)
		}
		f := fleettest.New(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute})
		f.Cycle(t, "inbox.example", len(f.Breakers))
		s := dial(t, url)
		if _, err := s.CompareAndSwap(t.Context(), aclPrefix+"list/k", 0, []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
		keys, _, err := s.List(t.Context(), aclPrefix+"list/", "", 100)
		if err != nil || !slices.Equal(keys, []string{aclPrefix + "list/k"}) {
			t.Errorf("List under the user's prefix: %q, %v", keys, err)
		}
	})

	t.Run("follow", func(t *testing.T) {
		s := dial(t, url)
		prefix := aclPrefix + "follow/"
		if _, err := s.CompareAndSwap(t.Context(), prefix+"before", 0, []byte("a"), time.Minute); err != nil {
			t.Fatal(err)
		}
		fd := newFeed()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Follow(ctx, prefix, 200*time.Millisecond, fd.fn) }()
		defer func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Follow: %v", err)
			}
		}()
		n := fd.waitFor(t, 0, 10*time.Second, "snapshot", putOf(prefix+"before", 0))
		n = fd.waitFor(t, n, 10*time.Second, "Synced", kindIs(driver.ChangeSynced))
		if _, err := s.CompareAndSwap(t.Context(), prefix+"after", 0, []byte("b"), time.Minute); err != nil {
			t.Fatal(err)
		}
		fd.waitFor(t, n, 10*time.Second, "the change", staleOf(prefix+"after"))
	})

	t.Run("outside the prefix", func(t *testing.T) {
		s := dial(t, url)
		// The default user writes a key where fleet-a may not read:
		// Follow's snapshot reads it.
		admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), TLSConfig: pki.ClientConfig()})
		defer admin.Close()
		if err := admin.HSet(t.Context(), "fleet-b/x", "v", "other fleet").Err(); err != nil {
			t.Fatal(err)
		}
		for name, call := range map[string]func() error{
			"Get": func() error { _, _, err := s.Get(t.Context(), "fleet-b/x"); return err },
			"CompareAndSwap": func() error {
				_, err := s.CompareAndSwap(t.Context(), "fleet-b/x", 0, []byte("v"), time.Minute)
				return err
			},
		} {
			err := call()
			if !strings.Contains(errString(err), "NOPERM") {
				t.Errorf("%s on another prefix: %v, want NOPERM", name, err)
			}
		}
		// Follow's snapshot is refused the other fleet's key: each
		// session ends in a Lost saying so, and none confirms a sync.
		followRefused(t, s, "fleet-b/")
	})

	t.Run("without CLIENT TRACKING", func(t *testing.T) {
		s := dial(t, "rediss://no-tracking:fleet-a-password@"+srv.Addr()+"/0")
		if _, _, err := s.Get(t.Context(), aclPrefix+"x"); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("Get: %v", err)
		}
		// The subscriber's connection turns its tracking on as it
		// connects: refused, the first session fails before its Reset,
		// and Follow returns the error; it never confirms a sync.
		fd := newFeed()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err := s.Follow(ctx, aclPrefix, 200*time.Millisecond, fd.fn)
		if ctx.Err() != nil || !strings.Contains(errString(err), "NOPERM") {
			t.Errorf("Follow without CLIENT TRACKING = %v (context %v), want an error saying NOPERM", err, ctx.Err())
		}
		if i := kindIs(driver.ChangeSynced)(fd.snapshot()); i >= 0 {
			t.Errorf("Synced although refused: %s", describe(fd.snapshot()))
		}
	})
}

// followRefused follows prefix on s until a Lost whose error says NOPERM,
// and fails t if a Synced came.
func followRefused(t *testing.T, s *redis.Store, prefix string) {
	t.Helper()
	fd := newFeed()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Follow(ctx, prefix, 200*time.Millisecond, fd.fn) }()
	fd.waitFor(t, 0, 10*time.Second, "Lost saying NOPERM", func(cs []driver.Change) int {
		return slices.IndexFunc(cs, func(c driver.Change) bool {
			return c.Kind == driver.ChangeLost && strings.Contains(errString(c.Err), "NOPERM")
		})
	})
	cancel()
	<-done
	if i := kindIs(driver.ChangeSynced)(fd.snapshot()); i >= 0 {
		t.Errorf("Synced although refused: %s", describe(fd.snapshot()))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestTLSMismatch: each way a TLS connection goes wrong is a
// *tlsdiag.Error of its kind, within the connect bound, naming the fix: a
// client that trusts another authority, one without the client certificate
// the server requires, and a redis:// (plain-text) URL to a TLS server.
// WithTLSConfig is refused with a redis:// URL and by New.
func TestTLSMismatch(t *testing.T) {
	pki := tlstest.MustNew(t, "redis test CA")
	other := tlstest.MustNew(t, "another CA")
	srv := redistest.MustStartWith(t, redistest.Options{TLS: pki, ClientCerts: true})
	for _, tc := range []struct {
		name string
		url  string
		opts []redis.Option
		kind tlsdiag.Problem
		want string
	}{
		{"another CA", srv.URL(), []redis.Option{redis.WithTLSConfig(other.ClientConfig())}, tlsdiag.Untrusted, `authority the client does not trust ("redis test CA"): give the client the authority that signed it`},
		{"system CAs", srv.URL(), nil, tlsdiag.Untrusted, "RootCAs"},
		{"no client certificate", srv.URL(), []redis.Option{redis.WithTLSConfig(pki.ServerOnlyConfig())}, tlsdiag.ClientCertRefused, "tls.Config.Certificates"},
		{"plain text", "redis://" + srv.Addr() + "/0", nil, tlsdiag.ServerSpeaksTLS, "use a rediss:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A minute's context against half of it: a mismatch is
			// reported when seen, not when the context ends.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			start := time.Now()
			s, err := redis.Dial(ctx, tc.url, tc.opts...)
			if err == nil {
				s.Close()
				t.Fatal("Dial succeeded")
			}
			te, ok := errors.AsType[*tlsdiag.Error](err)
			if !ok || te.Kind != tc.kind || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Dial: %v (%#v), want a *tlsdiag.Error of kind %d saying %q", err, te, tc.kind, tc.want)
			}
			if d := time.Since(start); d >= 30*time.Second {
				t.Errorf("took %v: the mismatch was reported when the context ended, not when seen", d)
			}
		})
	}
	_, err := redis.Dial(t.Context(), "redis://"+srv.Addr()+"/0", redis.WithTLSConfig(pki.ClientConfig()))
	if oe, ok := errors.AsType[*driver.OptionError](err); !ok || oe.Option != "WithTLSConfig" {
		t.Errorf("Dial redis:// WithTLSConfig: %v", err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	if _, err := redis.New(c, redis.WithTLSConfig(pki.ClientConfig())); !errors.As(err, new(*driver.OptionError)) {
		t.Errorf("New WithTLSConfig: %v", err)
	}
}

// exercise runs every method of s under prefix: writes, reads (of the
// Store's records and of foreign data of each Redis type, which admin
// writes), expiry, the clock, listing, and Follow up to a Synced and a
// change.
func exercise(ctx context.Context, s *redis.Store, admin *goredis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	k := prefix + "k"
	v, err := s.CompareAndSwap(ctx, k, 0, []byte("a"), time.Minute)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if _, _, err := s.Get(ctx, k); err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if v, err = s.CompareAndSwap(ctx, k, v, []byte("b"), time.Minute); err != nil {
		return fmt.Errorf("swap: %w", err)
	}
	if _, err := s.Expiry(ctx, k); err != nil {
		return fmt.Errorf("expiry: %w", err)
	}
	if _, _, err := s.SampleClock(ctx); err != nil {
		return fmt.Errorf("clock: %w", err)
	}
	if keys, _, err := s.List(ctx, prefix, "", 10); err != nil || len(keys) != 1 {
		return fmt.Errorf("list: %q, %w", keys, err)
	}
	if err := s.CompareAndDelete(ctx, k, v); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	f := prefix + "foreign/"
	for _, c := range []goredis.Cmder{
		admin.Set(ctx, f+"string", "x", 0), admin.RPush(ctx, f+"list", "x"), admin.SAdd(ctx, f+"set", "x"),
		admin.ZAdd(ctx, f+"zset", goredis.Z{Member: "x"}), admin.XAdd(ctx, &goredis.XAddArgs{Stream: f + "stream", Values: []string{"x", "y"}}),
		admin.HSet(ctx, f+"hash", "v", "x", "n", "not a version"),
	} {
		if c.Err() != nil {
			return c.Err()
		}
	}
	for _, t := range []string{"string", "list", "set", "zset", "stream", "hash"} {
		if _, _, err := s.Get(ctx, f+t); err != nil {
			return fmt.Errorf("get foreign %s: %w", t, err)
		}
	}
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	synced := make(chan struct{}, 1)
	put := make(chan struct{}, 1)
	lost := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(fctx, prefix+"follow/", 200*time.Millisecond, func(c driver.Change) {
			switch {
			case c.Kind == driver.ChangeSynced:
				notify(synced)
			case c.Kind == driver.ChangeStale && c.Key == prefix+"follow/k":
				notify(put)
			case c.Kind == driver.ChangeLost:
				select {
				case lost <- c.Err:
				default:
				}
			}
		})
	}()
	defer func() { fcancel(); <-done }()
	wait := func(ch chan struct{}, what string) error {
		select {
		case <-ch:
			return nil
		case err := <-lost:
			return fmt.Errorf("follow: lost before %s: %w", what, err)
		case err := <-done:
			done <- err
			return fmt.Errorf("follow ended before %s: %w", what, err)
		case <-ctx.Done():
			return fmt.Errorf("follow: no %s: %w", what, ctx.Err())
		}
	}
	if err := wait(synced, "Synced"); err != nil {
		return err
	}
	if _, err := s.CompareAndSwap(ctx, prefix+"follow/k", 0, []byte("c"), time.Minute); err != nil {
		return fmt.Errorf("create followed key: %w", err)
	}
	return wait(put, "the change")
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// untested are the commands of aclCommands TestACLCommandsNeeded cannot
// show a need for, and why.
var untested = map[string]string{
	"+dump":    "reads a key of a module's data type, which this server has none of",
	"+publish": "FollowDemand's beat for the whole fleet: refused, each feed beats with PINGs of its own, so no method fails without it",
}

// TestACLCommandsNeeded: a user granted aclCommands on its prefix runs
// every method (exercise), over TLS; a user granted all of them but one
// fails, for each of them but those in untested, and so does one not
// granted the invalidation channel: the list is what a Store
// needs, no more. (HELLO and UNSUBSCRIBE are not on it: go-redis does
// without HELLO, authenticating with AUTH, which every user may run, and
// closes a subscription's connection rather than unsubscribing.)
func TestACLCommandsNeeded(t *testing.T) {
	pki := tlstest.MustNew(t, "redis test CA")
	cmds := strings.Fields(aclCommands)[1:] // after -@all
	users := []string{"all " + strings.TrimPrefix(aclUser, "fleet-a ")}
	for i := range cmds {
		rest := slices.Delete(slices.Clone(cmds), i, i+1)
		users = append(users, fmt.Sprintf("without%d on >pw resetkeys ~p/* resetchannels &__redis__:invalidate -@all %s", i, strings.Join(rest, " ")))
	}
	users = append(users, "nochannel on >pw resetkeys ~p/* resetchannels "+aclCommands)
	srv := redistest.MustStartWith(t, redistest.Options{TLS: pki, Users: users})
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), TLSConfig: pki.ClientConfig()})
	defer admin.Close()
	dial := func(user, pw string) *redis.Store {
		s, err := redis.Dial(t.Context(), "rediss://"+user+":"+pw+"@"+srv.Addr()+"/0", redis.WithTLSConfig(pki.ClientConfig()))
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	if err := exercise(t.Context(), dial("all", "fleet-a-password"), admin, aclPrefix); err != nil {
		t.Fatalf("with every command of the list: %v", err)
	}
	s, err := redis.Dial(t.Context(), "rediss://nochannel:pw@"+srv.Addr()+"/0", redis.WithTLSConfig(pki.ClientConfig()))
	if err == nil {
		err = exercise(t.Context(), s, admin, "p/nochannel/")
		_ = s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("without the channel &__redis__:invalidate: %v, want NOPERM", err)
	}
	for i, c := range cmds {
		if why, ok := untested[c]; ok {
			t.Logf("without %s: not tested: %s", c, why)
			continue
		}
		// A script the server already has runs by EVALSHA; a server that
		// lost them (a restart, SCRIPT FLUSH) needs EVAL.
		if err := admin.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		s, err := redis.Dial(t.Context(), "rediss://without"+strconv.Itoa(i)+":pw@"+srv.Addr()+"/0", redis.WithTLSConfig(pki.ClientConfig()))
		if err == nil {
			err = exercise(t.Context(), s, admin, "p/"+strconv.Itoa(i)+"/")
			_ = s.Close()
		}
		if err == nil {
			t.Errorf("without %s: every method worked; drop it from the list", c)
		} else {
			t.Logf("without %s: %v", c, err)
		}
	}
}
