// Command consumers checks what a user inherits: for each way of using
// kvbreaker it writes a throwaway consumer module (in a temp dir, outside
// the workspace) that imports only those packages, resolves it with
// `go mod tidy` against this checkout, and fails if `go list -m all` names a
// module that consumer must not carry: another backend's SDK, the test
// servers' dependencies (etcd server, testcontainers, moby) or the
// benchmarks' (gobreaker, x/perf). It prints each consumer's module count.
//
//	go run ./tools/consumers        (from the repository root; make test runs it)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// consumer is one way of using kvbreaker: the packages it imports, the
// repository modules those come from, and the module paths (prefixes) that
// must not be in its graph.
type consumer struct {
	name      string
	imports   []string
	modules   []string // repository modules besides the root
	forbidden []string
}

const repo = "github.com/kvbreaker/kvbreaker"

// Modules no consumer of the library may carry.
var always = []string{
	"go.etcd.io/etcd/server", "go.etcd.io/bbolt", "go.etcd.io/raft",
	"github.com/testcontainers", "github.com/moby", "github.com/docker",
	"github.com/sony/gobreaker", "golang.org/x/perf", "honnef.co/go/tools",
	"github.com/spf13/cobra",
	repo + "/bench", repo + "/cmd", repo + "/testservers", repo + "/tools",
}

var (
	etcdMods  = []string{"go.etcd.io/etcd", "google.golang.org/grpc", "go.uber.org/zap", repo + "/backends/etcd"}
	awsMods   = []string{"github.com/aws/", repo + "/backends/dynamodb"}
	cfMods    = []string{"github.com/cloudflare/", repo + "/backends/cloudflarekv"}
	backendOf = func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return append(out, always...)
	}
)

var consumers = []consumer{
	{
		name:      "core",
		imports:   []string{repo, repo + "/backends/memory", repo + "/conformance", repo + "/conformance/faultproxy", repo + "/skew", repo + "/driver"},
		forbidden: backendOf(etcdMods, awsMods, cfMods),
	},
	{
		name:      "etcd",
		imports:   []string{repo, repo + "/backends/etcd"},
		modules:   []string{"backends/etcd"},
		forbidden: backendOf(awsMods, cfMods),
	},
	{
		name:      "dynamodb",
		imports:   []string{repo, repo + "/backends/dynamodb"},
		modules:   []string{"backends/dynamodb"},
		forbidden: backendOf(etcdMods, cfMods),
	},
	{
		name:      "cloudflarekv",
		imports:   []string{repo, repo + "/backends/cloudflarekv"},
		modules:   []string{"backends/cloudflarekv"},
		forbidden: backendOf(etcdMods, awsMods),
	},
}

func main() {
	root := flag.String("repo", ".", "the repository's root directory")
	keep := flag.Bool("keep", false, "keep the consumer modules (their directories are printed)")
	flag.Parse()
	abs, err := filepath.Abs(*root)
	if err != nil {
		fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	failed := false
	for _, c := range consumers {
		mods, dir, err := graph(ctx, abs, c)
		if !*keep {
			os.RemoveAll(dir)
		} else {
			fmt.Println("kept", dir)
		}
		if err != nil {
			fmt.Printf("FAIL %-13s %v\n", c.name, err)
			failed = true
			continue
		}
		var bad []string
		for _, m := range mods {
			for _, f := range c.forbidden {
				if strings.HasPrefix(m, f) {
					bad = append(bad, m)
					break
				}
			}
		}
		if len(bad) > 0 {
			fmt.Printf("FAIL %-13s %d modules, forbidden: %s\n", c.name, len(mods), strings.Join(bad, ", "))
			failed = true
			continue
		}
		fmt.Printf("ok   %-13s %d modules: %s\n", c.name, len(mods), strings.Join(mods, " "))
	}
	if failed {
		os.Exit(1)
	}
}

// graph writes c's consumer module, tidies and builds it, and returns
// `go list -m all` without the consumer itself.
func graph(ctx context.Context, repoDir string, c consumer) ([]string, string, error) {
	dir, err := os.MkdirTemp("", "kvbreaker-consumer-"+c.name+"-")
	if err != nil {
		return nil, "", err
	}
	var gomod strings.Builder
	fmt.Fprintf(&gomod, "module example.com/consumer\n\ngo 1.26.0\n\nrequire %s v0.0.0\n\nreplace %s => %s\n", repo, repo, repoDir)
	for _, m := range c.modules {
		fmt.Fprintf(&gomod, "\nrequire %s/%s v0.0.0\n\nreplace %s/%s => %s\n", repo, m, repo, m, filepath.Join(repoDir, m))
	}
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range c.imports {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n\nfunc main() {}\n")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod.String()), 0o644); err != nil {
		return nil, dir, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644); err != nil {
		return nil, dir, err
	}
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := run("mod", "tidy"); err != nil {
		return nil, dir, err
	}
	if _, err := run("build", "-o", os.DevNull, "."); err != nil {
		return nil, dir, err
	}
	out, err := run("list", "-m", "all")
	if err != nil {
		return nil, dir, err
	}
	var mods []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		mods = append(mods, strings.Fields(l)[0])
	}
	return mods, dir, nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "consumers:", err)
	os.Exit(1)
}
