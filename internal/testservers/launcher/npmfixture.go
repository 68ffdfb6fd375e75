// Package launcher is what the test-server launchers of this repository
// (internal/testservers/...) share: Start and Process run a server in a
// child process that exits when its stdin closes, ready once its output
// says so; Server is the lifecycle built on it (Restart on the same
// address, Stop, Kill, Pause and Resume by signal); Dir and Install locate
// the npm-based fixtures (internal/testservers/dynalite,
// internal/testservers/miniflare), each with a pinned package.json and
// package-lock.json beside its Go code, and install them with `npm ci` on
// first use, so CI needs only node and npm on PATH.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Dir returns a fixture's directory: $env if set, else the directory of
// sourceFile (the fixture's own file, from runtime.Caller), which must be
// absolute (it is not under -trimpath).
func Dir(name, env, sourceFile string) (string, error) {
	if d := os.Getenv(env); d != "" {
		return d, nil
	}
	if !filepath.IsAbs(sourceFile) {
		return "", fmt.Errorf("%s fixture: cannot locate its directory (built with -trimpath?): set %s to the path of internal/testservers/%s", name, env, name)
	}
	return filepath.Dir(sourceFile), nil
}

var installMu sync.Mutex

// Install runs `npm ci` in dir unless node_modules/pkg is there already.
// Concurrent test binaries serialise on a lock file, so the first one
// installs and the others find the result.
func Install(ctx context.Context, name, dir, pkg string) error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("%s fixture: node not found on PATH: install Node.js 20 or later (e.g. apt-get install nodejs npm)", name)
	}
	marker := filepath.Join(dir, "node_modules", pkg, "package.json")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	unlock, err := lockFile(filepath.Join(os.TempDir(), "kvbreaker-"+name+"-install.lock"))
	if err != nil {
		return fmt.Errorf("%s fixture: %w", name, err)
	}
	defer unlock()
	if _, err := os.Stat(marker); err == nil {
		return nil // another process installed it while we waited
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return fmt.Errorf("%s fixture: npm not found on PATH: install npm, or run `npm ci` in %s", name, dir)
	}
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s fixture: `npm ci` in %s failed (it needs the npm registry): %w\n%s", name, dir, err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		return errors.Join(fmt.Errorf("%s fixture: `npm ci` in %s did not install %s", name, dir, pkg), err)
	}
	return nil
}
