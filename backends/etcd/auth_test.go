package etcd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
)

// startWithUser starts a server with authentication on, its root user,
// and user (password user+"-password") whose one role may do perm on the
// keys under prefix, nothing else.
func startWithUser(t *testing.T, user, prefix string, perm clientv3.PermissionType) *etcdtest.Server {
	t.Helper()
	srv := etcdtest.MustStart(t)
	ctx := t.Context()
	admin, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	role := user + "-role"
	steps := []func() error{
		func() error { _, err := admin.RoleAdd(ctx, "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "root", "root-password"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, role); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), perm)
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, user, user+"-password"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, user, role); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth set-up step %d: %v", i+1, err)
		}
	}
	return srv
}

// TestUserWithPrefixRole: with etcd's authentication on, a user whose one
// role may read and write the keys under its fleet's prefix, nothing else,
// runs a fleet of Breakers through a circuit's life and lists its keys;
// the same user is refused (permission denied) a key outside the prefix,
// and a wrong password is refused when the client is made.
func TestUserWithPrefixRole(t *testing.T) {
	const prefix = "fleet-a/"
	srv := startWithUser(t, "app", prefix, clientv3.PermissionType(clientv3.PermReadWrite))
	ctx := t.Context()
	user := func(t *testing.T, password string) (*etcd.Store, error) {
		t.Helper()
		cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second,
			Username: "app", Password: password, Context: ctx})
		if err != nil {
			return nil, err
		}
		s, err := etcd.New(cli)
		if err != nil {
			cli.Close()
			return nil, err
		}
		t.Cleanup(func() { _ = s.Close(); _ = cli.Close() })
		return s, nil
	}
	var stores []driver.Store
	for range 4 {
		s, err := user(t, "app-password")
		if err != nil {
			t.Fatal(err)
		}
		p, err := kvbreaker.Prefixed(s, prefix+"fleet/")
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, p)
	}
	f := fleettest.New(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute})
	f.Cycle(t, "inbox.example", 16)

	s, err := user(t, "app-password")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompareAndSwap(ctx, prefix+"list/k", driver.NoVersion, []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	keys, _, err := s.List(ctx, prefix+"list/", "", 100)
	if err != nil || len(keys) != 1 || keys[0] != prefix+"list/k" {
		t.Errorf("List under the user's prefix = %q, %v; want its one key", keys, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for name, call := range map[string]func() error{
		"Get": func() error { _, _, err := s.Get(cctx, "fleet-b/x"); return err },
		"CompareAndSwap": func() error {
			_, err := s.CompareAndSwap(cctx, "fleet-b/x", driver.NoVersion, []byte("v"), time.Minute)
			return err
		},
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s outside the user's prefix = %v; want permission denied", name, err)
		}
	}
	if _, err := user(t, "wrong"); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("a wrong password = %v; want authentication failed", err)
	}
}
