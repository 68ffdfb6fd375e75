package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"

	"github.com/kvbreaker/kvbreaker/tools/internal/modset"
)

// TestMissingRootVersionFails is the check's negative control: a nested
// module whose tagged go.mod requires a root version the proxy does not
// serve (as every nested module did when it required v0.0.0 with a
// replace) must fail the check, at `go get` of that module.
func TestMissingRootVersionFails(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and runs go get (-short)")
	}
	for _, kv := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(kv, "negative control")
	}
	for _, kv := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(kv, "control@kvbreaker.invalid")
	}
	const missing = "v0.0.0" // what every nested module required before v0.1.0
	mutated := false
	breakRedis := func(clone string) error {
		f := filepath.Join(clone, "backends", "redis", "go.mod")
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		mf, err := modfile.Parse(f, data, nil)
		if err != nil {
			return err
		}
		if err := mf.AddRequire(repoPath, missing); err != nil {
			return err
		}
		if data, err = mf.Format(); err != nil {
			return err
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			return err
		}
		for _, args := range [][]string{
			{"commit", "-q", "-am", "backends/redis requires a root version nobody tagged"},
			{"tag", "-f", "-a", "-m", "moved", "backends/redis/v0.1.0"},
		} {
			if _, err := modset.Git(clone, args...); err != nil {
				return err
			}
		}
		mutated = true
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := Run(ctx, Config{Repo: "../..", Version: "v0.1.0", Only: []string{"redis"}, Mutate: breakRedis, Log: t.Logf})
	if !mutated {
		t.Fatalf("the check failed before the control could break a module: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "redis: go get") || !strings.Contains(err.Error(), repoPath+"@"+missing) {
		t.Fatalf("the check over a backend requiring %s@%s: %v; want a go get failure naming that version", repoPath, missing, err)
	}
	t.Logf("the check failed as it must:\n%v", err)
}
