// Command consumers checks what a user inherits: for each way of using
// kvbreaker it writes a throwaway consumer module (in a temp dir, outside
// the workspace) that requires the repository's modules at -version, with
// no replace, imports only those packages, resolves it with `go mod tidy`,
// and fails if `go list -m all` names a module that consumer must not
// carry: another backend's SDK, the test servers' dependencies (etcd
// server, testcontainers, moby) or the benchmarks' (gobreaker, x/perf). It
// prints each consumer's module count.
//
// The version must be served by GOPROXY: tools/published runs it with a
// file-system proxy of a tagged clone (make consumers, make published):
//
//	go run ./tools/published -only consumers
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// version is the version of the repository's modules consumers require.
var version string

// shared are test libraries any backend may require.
var shared = map[string]bool{"go.uber.org/goleak": true}

// Modules no consumer of the library may carry.
var always = []string{
	"go.etcd.io/etcd/server", "go.etcd.io/bbolt", "go.etcd.io/raft",
	"github.com/nats-io/nats-server",
	"github.com/testcontainers", "github.com/moby", "github.com/docker",
	"github.com/sony/gobreaker", "golang.org/x/perf", "honnef.co/go/tools",
	"github.com/spf13/cobra",
	"github.com/hibiken/asynq", "github.com/riverqueue",
	repo + "/bench", repo + "/examples", repo + "/cmd", repo + "/internal/testservers", repo + "/tools",
}

// backend is a backend module of the workspace and what it requires
// directly (its client SDK, and test libraries).
type backend struct {
	dir    string // "backends/etcd"
	direct []string
}

// consumersOf builds the consumers from the workspace: one of the root
// packages, and one per backend module in go.work, which must carry nothing
// of the other backends (their modules, and what they require directly that
// it does not) and nothing of the always-forbidden list. Adding a backend
// module to go.work adds its consumer here.
func consumersOf(root string) ([]consumer, error) {
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	var backends []backend
	for _, l := range strings.Split(string(work), "\n") {
		d, ok := strings.CutPrefix(strings.TrimSpace(l), "./backends/")
		if !ok {
			continue
		}
		b := backend{dir: "backends/" + d}
		mod, err := os.ReadFile(filepath.Join(root, b.dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		for _, ml := range strings.Split(string(mod), "\n") {
			f := strings.Fields(ml)
			if len(f) == 2 && strings.Contains(f[0], ".") && !strings.HasPrefix(f[0], repo) {
				b.direct = append(b.direct, f[0]) // "path version", no "// indirect"
			}
		}
		backends = append(backends, b)
	}
	if len(backends) == 0 {
		return nil, errors.New("go.work uses no ./backends/ module")
	}
	var all []string
	for _, b := range backends {
		all = append(all, repo+"/"+b.dir)
		all = append(all, b.direct...)
	}
	// The root package's Observer hooks exist so that the core carries no
	// OpenTelemetry: that lives in otelkvbreaker.
	cs := []consumer{{
		name:      "core",
		imports:   []string{repo, repo + "/backends/memory", repo + "/conformance", repo + "/conformance/faultproxy", repo + "/skew", repo + "/driver"},
		forbidden: append(append(slices.Clone(always), all...), "go.opentelemetry.io", repo+"/otelkvbreaker"),
	}}
	for _, b := range backends {
		own := map[string]bool{repo + "/" + b.dir: true}
		for _, d := range b.direct {
			own[d] = true
		}
		c := consumer{name: filepath.Base(b.dir), imports: []string{repo, repo + "/" + b.dir}, modules: []string{b.dir}, forbidden: slices.Clone(always)}
		for _, m := range all {
			if !own[m] {
				c.forbidden = append(c.forbidden, m)
			}
		}
		cs = append(cs, c)
	}
	// otelkvbreaker carries the OTel API (and, as its tests' requirements,
	// the OTel SDK) but no backend, and not the Prometheus exporter its
	// example module (otelkvbreaker/promexample) uses.
	if strings.Contains(string(work), "./otelkvbreaker\n") {
		cs = append(cs, consumer{
			name:      "otelkvbreaker",
			imports:   []string{repo, repo + "/otelkvbreaker"},
			modules:   []string{"otelkvbreaker"},
			forbidden: append(append(slices.Clone(always), all...), "github.com/prometheus", "go.opentelemetry.io/otel/exporters", repo+"/otelkvbreaker/promexample"),
		})
	}
	return cs, nil
}

func main() {
	root := flag.String("repo", ".", "the repository's root directory")
	keep := flag.Bool("keep", false, "keep the consumer modules (their directories are printed)")
	flag.StringVar(&version, "version", "", "the version of the repository's modules to require (GOPROXY must serve it)")
	flag.Parse()
	if version == "" {
		fatal(errors.New("-version is required; make consumers runs this through tools/published"))
	}
	abs, err := filepath.Abs(*root)
	if err != nil {
		fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	consumers, err := consumersOf(abs)
	if err != nil {
		fatal(err)
	}
	failed := false
	// What the core consumer carries (x/net's requirements, say) is no
	// other backend's: it is allowed everywhere.
	var coreMods map[string]bool
	for _, c := range consumers {
		mods, dir, err := graph(ctx, abs, c)
		if c.name == "core" && err == nil {
			coreMods = map[string]bool{}
			for _, m := range mods {
				coreMods[m] = true
			}
			// The root module's own requirements (x/net's, say) are
			// core's, whichever backend also requires them.
			c.forbidden = slices.DeleteFunc(c.forbidden, func(f string) bool { return shared[f] || coreMods[f] && !strings.HasPrefix(f, repo) })
		} else {
			c.forbidden = slices.DeleteFunc(c.forbidden, func(f string) bool { return coreMods[f] || shared[f] })
		}
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
				if m == f || strings.HasPrefix(m, f+"/") || strings.HasSuffix(f, "/") && strings.HasPrefix(m, f) {
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
	// Negative control: a consumer of two backends, judged as a consumer
	// of the last one, must be caught carrying the other's SDK.
	var backends []consumer
	for _, c := range consumers {
		if len(c.modules) == 1 && strings.HasPrefix(c.modules[0], "backends/") {
			backends = append(backends, c)
		}
	}
	if n := len(backends); n >= 2 {
		a, b := backends[0], backends[n-1]
		ctl := consumer{name: "control", imports: append(slices.Clone(a.imports), b.imports[1:]...), modules: append(slices.Clone(a.modules), b.modules...), forbidden: b.forbidden}
		mods, dir, err := graph(ctx, abs, ctl)
		os.RemoveAll(dir)
		caught := false
		for _, m := range mods {
			caught = caught || slices.Contains(ctl.forbidden, m)
		}
		switch {
		case err != nil:
			fmt.Printf("FAIL control       %v\n", err)
			failed = true
		case !caught:
			fmt.Printf("FAIL control       a consumer of %s and %s passed as a consumer of %s: the check cannot fail\n", a.name, b.name, b.name)
			failed = true
		default:
			fmt.Printf("ok   control       a consumer of %s and %s is caught as a consumer of %s\n", a.name, b.name, b.name)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// graph writes c's consumer module, tidies and builds it, and returns
// `go list -m all` without the consumer itself.
func graph(ctx context.Context, _ string, c consumer) ([]string, string, error) {
	dir, err := os.MkdirTemp("", "kvbreaker-consumer-"+c.name+"-")
	if err != nil {
		return nil, "", err
	}
	var gomod strings.Builder
	fmt.Fprintf(&gomod, "module example.com/consumer\n\ngo 1.26.0\n\nrequire %s %s\n", repo, version)
	for _, m := range c.modules {
		fmt.Fprintf(&gomod, "\nrequire %s/%s %s\n", repo, m, version)
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
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if os.Getenv("GOFLAGS") == "" {
			cmd.Env = append(cmd.Env, "GOFLAGS=-mod=mod")
		}
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
