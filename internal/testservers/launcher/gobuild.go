package launcher

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 (all
// held open until each is picked, so none repeats).
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// built holds one build per source directory for the process's lifetime.
var built sync.Map // src -> *buildOnce

type buildOnce struct {
	once sync.Once
	path string
	err  error
}

// BuildGo builds the Go program in src (a module of this repository's
// workspace, which the go command on PATH finds from there) once per
// process, and returns the binary's path. The binary goes to a directory
// of the user's and of this checkout: test binaries of other checkouts (git
// worktrees) build theirs at the same time, from other sources. The build
// cache makes every build after the first a link.
func BuildGo(ctx context.Context, name, src string) (string, error) {
	v, _ := built.LoadOrStore(src, &buildOnce{})
	b := v.(*buildOnce)
	b.once.Do(func() {
		sum := sha256.Sum256([]byte(src))
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("kvbreaker-%s-%d-%x", name, os.Getuid(), sum[:6]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.err = err
			return
		}
		out := filepath.Join(dir, name)
		tmp := fmt.Sprintf("%s.%d", out, os.Getpid())
		cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s (go build in %s): %v\n%s", name, src, err, out)
			return
		}
		if err := os.Rename(tmp, out); err != nil {
			b.err = err
			return
		}
		b.path = out
	})
	return b.path, b.err
}
