// Command published checks the path a user takes, without publishing and
// without the network for this repository's modules: it snapshots the
// working tree (tracked and untracked files git does not ignore) into a
// temporary clone, builds the command there with its VCS stamp, runs
// tools/release in the clone to commit and tag every module at the
// release's version, serves those tags from a file-system module proxy,
// and then, with GOWORK=off, GOFLAGS=-mod=mod, a temporary module cache and
// no replace anywhere:
//
//   - checks each tagged go.mod has no replace, each module's zip has a
//     licence file pkg.go.dev recognises at its root (checkLicence), and
//     each go.sum line of a module of ours matches the hash the proxy serves;
//   - in a throwaway module per library module, `go get`s it at the
//     version on its own and builds a small program against it (the root
//     and otelkvbreaker programs also run);
//   - `go install …/cmd/kvbreaker@VERSION` and checks that
//     `kvbreaker --version` prints the version;
//   - runs tools/consumers (the consumer-graph check) on the same proxy.
//
// Third-party modules come from the module cache's download directory
// (file://$GOMODCACHE/cache/download), then from GOPROXY. Builds use
// -trimpath, so the temporary module cache's path does not defeat the
// build cache.
//
//	go run ./tools/published                     (make published; part of make test)
//	go run ./tools/published -only consumers     (make consumers)
//	go run ./tools/published -keep               keep the temporary directory
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"

	"github.com/kvbreaker/kvbreaker/tools/internal/modset"
)

const repoPath = "github.com/kvbreaker/kvbreaker"

// Steps are the check's steps, for -only.
var Steps = []string{"vcs", "root", "cloudflarekv", "dynamodb", "etcd", "mysql", "nats", "postgres", "redis", "sqlite", "otelkvbreaker", "install", "consumers"}

// Config is one run of the check.
type Config struct {
	Repo    string   // the repository's root directory
	Version string   // the release's version; "" is the one go.work resolves
	Only    []string // steps to run (Steps); nil is all
	Keep    bool     // keep the temporary directory
	// Mutate, if set, runs on the tagged clone before the proxy is built
	// (the negative control breaks a module with it).
	Mutate func(clone string) error
	Log    func(format string, args ...any)
}

func main() {
	var c Config
	only := flag.String("only", "", "comma-separated steps to run: "+strings.Join(Steps, ","))
	flag.StringVar(&c.Repo, "repo", ".", "the repository's root directory")
	flag.StringVar(&c.Version, "version", "", "the release's version (default: the version go.work resolves to the checkout)")
	flag.BoolVar(&c.Keep, "keep", false, "keep the temporary directory")
	flag.Parse()
	if *only != "" {
		c.Only = strings.Split(*only, ",")
	}
	c.Log = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := Run(ctx, c); err != nil {
		fmt.Fprintf(os.Stderr, "published: FAIL after %s: %v\n", time.Since(start).Round(time.Second), err)
		os.Exit(1)
	}
	fmt.Printf("published: ok in %s\n", time.Since(start).Round(time.Second))
}

// Run runs the check.
func Run(ctx context.Context, c Config) error {
	root, err := filepath.Abs(c.Repo)
	if err != nil {
		return err
	}
	for _, s := range c.Only {
		if !slices.Contains(Steps, s) {
			return fmt.Errorf("unknown step %q (steps: %s)", s, strings.Join(Steps, ", "))
		}
	}
	want := func(step string) bool { return c.Only == nil || slices.Contains(c.Only, step) }
	mods, err := modset.Load(root)
	if err != nil {
		return err
	}
	if c.Version == "" {
		if c.Version, err = workVersion(root); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "kvbreaker-published-")
	if err != nil {
		return err
	}
	if c.Keep {
		c.Log("keeping %s", tmp)
	} else {
		defer removeAll(tmp)
	}
	clone, proxy, bin := filepath.Join(tmp, "repo"), filepath.Join(tmp, "proxy"), filepath.Join(tmp, "bin")
	gitEnv := []string{"GIT_AUTHOR_NAME=kvbreaker published check", "GIT_AUTHOR_EMAIL=published@kvbreaker.invalid",
		"GIT_COMMITTER_NAME=kvbreaker published check", "GIT_COMMITTER_EMAIL=published@kvbreaker.invalid"}
	run := func(dir string, env []string, name string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), gitEnv...), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
		}
		return string(out), nil
	}

	// The tools, built from the checkout (the workspace, the warm cache).
	if _, err := run(root, nil, "go", "build", "-o", bin+string(filepath.Separator), "./tools/release", "./tools/consumers"); err != nil {
		return err
	}
	// A commit of the working tree as `git add -A` would make it, through
	// a temporary index: the check sees uncommitted work, and nothing of
	// the repository (index, refs, work tree) changes.
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	if _, err := run(root, idx, "git", "read-tree", "HEAD"); err != nil {
		return err
	}
	if _, err := run(root, idx, "git", "add", "-A"); err != nil {
		return err
	}
	tree, err := run(root, idx, "git", "write-tree")
	if err != nil {
		return err
	}
	snap, err := run(root, nil, "git", "commit-tree", "-p", "HEAD", "-m", "published check: the working tree", strings.TrimSpace(tree))
	if err != nil {
		return err
	}
	snap = strings.TrimSpace(snap)
	if _, err := run(tmp, nil, "git", "clone", "-q", "--shared", "--no-checkout", "--no-tags", root, clone); err != nil {
		return err
	}
	if _, err := run(clone, nil, "git", "checkout", "-q", snap); err != nil {
		return err
	}
	c.Log("snapshot %.12s of %s in %s", snap, root, clone)

	if want("vcs") {
		if err := checkVCS(ctx, c, clone, filepath.Join(tmp, "kvbreaker-clone"), run); err != nil {
			return err
		}
	}

	out, err := run(clone, nil, filepath.Join(bin, "release"), "-version", c.Version, "-do")
	if err != nil {
		return err
	}
	c.Log("%s", strings.TrimSpace(indent(out)))
	if c.Mutate != nil {
		if err := c.Mutate(clone); err != nil {
			return err
		}
	}

	// The proxy: every tag at the version, zipped as the go command zips it.
	tagged, err := run(clone, nil, "git", "tag", "-l", c.Version, "*/"+c.Version)
	if err != nil {
		return err
	}
	var versions []module.Version
	zips := map[string][]byte{}
	for _, tag := range strings.Fields(tagged) {
		dir := strings.TrimSuffix(strings.TrimSuffix(tag, c.Version), "/")
		gomod, err := run(clone, nil, "git", "show", tag+":"+path.Join(dir, "go.mod"))
		if err != nil {
			return err
		}
		f, err := modfile.Parse(tag+":go.mod", []byte(gomod), nil)
		if err != nil {
			return err
		}
		if len(f.Replace) > 0 {
			return fmt.Errorf("%s: go.mod has replace directives (%s …): consumers ignore them and go install refuses them", tag, f.Replace[0].Old.Path)
		}
		mv := module.Version{Path: f.Module.Mod.Path, Version: c.Version}
		z, err := modset.ZipFromGit(clone, &modset.Module{Dir: dir, Path: mv.Path}, c.Version, tag)
		if err != nil {
			return err
		}
		if _, err := checkLicence(z, mv); err != nil {
			return err
		}
		at, err := run(clone, nil, "git", "log", "-1", "--format=%cI", tag)
		if err != nil {
			return err
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(at))
		if err != nil {
			return err
		}
		if err := modset.AddToProxy(proxy, mv, z, t); err != nil {
			return err
		}
		versions = append(versions, mv)
		zips[mv.Path] = z
	}
	if len(versions) != len(mods) {
		return fmt.Errorf("tools/release tagged %d modules at %s, go.work uses %d", len(versions), c.Version, len(mods))
	}
	// What a module's go.sum says of ours must be what the proxy serves.
	for _, mv := range versions {
		name := shortName(mv.Path)
		if c.Only != nil && !slices.Contains(c.Only, name) && !(name == "kvbreaker" && want("install")) {
			continue
		}
		sum, err := fileInZip(zips[mv.Path], mv, "go.sum")
		if err != nil {
			continue // no go.sum
		}
		for _, l := range strings.Split(string(sum), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 || zips[f[0]] == nil || !strings.HasPrefix(f[1], c.Version) {
				continue
			}
			lines, err := modset.SumLines(f[0], c.Version, zips[f[0]])
			if err != nil {
				return err
			}
			if !slices.Contains(lines, l) {
				return fmt.Errorf("%s@%s: go.sum line %q is not what the proxy serves (%s)", mv.Path, mv.Version, l, strings.Join(lines, "; "))
			}
		}
	}
	c.Log("ok   proxy          %d modules at %s, tagged go.mod files without replace, go.sum hashes match, each zip with its %s licence", len(versions), c.Version, wantLicence)

	realCache, err := run(root, nil, "go", "env", "GOMODCACHE")
	if err != nil {
		return err
	}
	goproxy, err := run(root, nil, "go", "env", "GOPROXY")
	if err != nil {
		return err
	}
	gobin := filepath.Join(tmp, "gobin")
	env := []string{
		"GOWORK=off", "GOFLAGS=-mod=mod -trimpath", "GOTOOLCHAIN=local",
		"GOMODCACHE=" + filepath.Join(tmp, "modcache"), "GOBIN=" + gobin,
		"GOPROXY=file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(strings.TrimSpace(realCache), "cache", "download")) + "," + strings.TrimSpace(goproxy),
		// Ours are in no checksum database: the go.sum checks above stand in.
		"GONOSUMDB=" + repoPath, "GOPRIVATE=",
	}
	for _, p := range programs {
		if !want(p.step) {
			continue
		}
		dir := filepath.Join(tmp, "use-"+p.step)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(p.src), 0o644); err != nil {
			return err
		}
		if _, err := run(dir, env, "go", "mod", "init", "example.com/use"+p.step); err != nil {
			return err
		}
		if _, err := run(dir, env, "go", "get", p.module+"@"+c.Version); err != nil {
			return fmt.Errorf("%s: %w", p.step, err)
		}
		what := "built"
		if p.run != "" {
			out, err := run(dir, env, "go", "run", ".")
			if err != nil {
				return fmt.Errorf("%s: %w", p.step, err)
			}
			if !strings.Contains(out, p.run) {
				return fmt.Errorf("%s: go run printed %q, want %q in it", p.step, out, p.run)
			}
			what = "ran: " + strings.TrimSpace(out)
		} else if _, err := run(dir, env, "go", "build", "-o", os.DevNull, "."); err != nil {
			return fmt.Errorf("%s: %w", p.step, err)
		}
		c.Log("ok   %-14s go get %s@%s; a program %s", p.step, p.module, c.Version, what)
	}
	if want("install") {
		pkg := repoPath + "/cmd/kvbreaker@" + c.Version
		if _, err := run(tmp, env, "go", "install", pkg); err != nil {
			return err
		}
		out, err := run(tmp, env, filepath.Join(gobin, "kvbreaker"), "--version")
		if err != nil {
			return err
		}
		if !strings.HasPrefix(out, "kvbreaker "+c.Version+" ") {
			return fmt.Errorf("go install %s: kvbreaker --version printed %q, want it to start with %q", pkg, out, "kvbreaker "+c.Version+" ")
		}
		c.Log("ok   install        go install %s; %s", pkg, strings.TrimSpace(out))
	}
	if want("consumers") {
		out, err := run(tmp, env, filepath.Join(bin, "consumers"), "-repo", clone, "-version", c.Version)
		if err != nil {
			return err
		}
		c.Log("ok   consumers      the consumer-graph check on the proxy:\n%s", strings.TrimRight(indent(out), "\n"))
	}
	return nil
}

// checkVCS builds the command in the clone (the workspace, as a developer
// would) and checks that --version names the clone's commit, then -dirty
// once a tracked file changes.
func checkVCS(ctx context.Context, c Config, clone, exe string, run func(string, []string, string, ...string) (string, error)) error {
	rev, err := run(clone, nil, "git", "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	rev = strings.TrimSpace(rev)[:12]
	env := []string{"GOFLAGS=-buildvcs=true -trimpath"}
	for _, dirty := range []bool{false, true} {
		if dirty {
			f := filepath.Join(clone, "go.work")
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := os.WriteFile(f, append(data, "\n// changed\n"...), 0o644); err != nil {
				return err
			}
			defer os.WriteFile(f, data, 0o644)
		}
		if _, err := run(filepath.Join(clone, "cmd", "kvbreaker"), env, "go", "build", "-o", exe, "."); err != nil {
			return err
		}
		out, err := run(clone, nil, exe, "--version")
		if err != nil {
			return err
		}
		// The version is (devel), or since Go 1.24 a pseudo-version
		// (+dirty) of the commit; either way the commit follows.
		want := "(commit " + rev
		if dirty {
			want += "-dirty"
		}
		if !strings.HasPrefix(out, "kvbreaker ") || !strings.Contains(out, want+" ") {
			return fmt.Errorf("a build from a clone at %s (dirty %v): --version printed %q, want %q in it", rev, dirty, out, want+" ")
		}
		if dirty {
			c.Log("ok   vcs            a build from a clone: %s", strings.TrimSpace(out))
		}
	}
	return ctx.Err()
}

// program is a throwaway consumer of one module.
type program struct {
	step, module, src string
	run               string // if set, the program runs and prints this
}

var programs = []program{
	{step: "root", module: repoPath, run: "hold", src: `package main

import (
	"context"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

func main() {
	b, err := kvbreaker.New(memory.New(), kvbreaker.Settings{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	host, err := kvbreaker.HostKey("https://inbox.example/users/alice/inbox")
	if err != nil {
		panic(err)
	}
	for range 5 {
		b.Failure(ctx, host)
	}
	v, err := b.Allow(ctx, host, time.Time{})
	fmt.Println(host, v.Decision, err)
}
`},
	{step: "cloudflarekv", module: repoPath + "/backends/cloudflarekv", src: `package main

import (
	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/cloudflarekv"
)

func main() {
	store, err := cloudflarekv.New(kv.NewKVService(option.WithAPIToken("token")), "account", "namespace")
	if err != nil {
		panic(err)
	}
	if _, err := kvbreaker.New(store, kvbreaker.Settings{}); err != nil {
		panic(err)
	}
}
`},
	{step: "dynamodb", module: repoPath + "/backends/dynamodb", src: `package main

import (
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
)

func main() {
	store, err := dynamodb.New(dyn.New(dyn.Options{Region: "us-east-1"}), "kvbreaker")
	if err != nil {
		panic(err)
	}
	if _, err := kvbreaker.New(store, kvbreaker.Settings{}); err != nil {
		panic(err)
	}
}
`},
	{step: "etcd", module: repoPath + "/backends/etcd", src: `package main

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
)

func main() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	etcdStore, err := etcd.New(cli)
	if err != nil {
		panic(err)
	}
	store, err := kvbreaker.Prefixed(etcdStore, "fleet-a/")
	if err != nil {
		panic(err)
	}
	if _, err := kvbreaker.New(store, kvbreaker.Settings{}); err != nil {
		panic(err)
	}
}
`},
	{step: "mysql", module: repoPath + "/backends/mysql", src: `package main

import (
	"database/sql"

	_ "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/mysql"
)

func main() {
	db, err := sql.Open("mysql", "app@tcp(127.0.0.1:3306)/kvbreaker")
	if err != nil {
		panic(err)
	}
	store, err := mysql.New(db, "kvbreaker_records")
	if err != nil {
		panic(err)
	}
	if _, err := kvbreaker.New(store, kvbreaker.Settings{}); err != nil {
		panic(err)
	}
}
`},
	{step: "nats", module: repoPath + "/backends/nats", src: `package main

import (
	"context"

	natsgo "github.com/nats-io/nats.go"

	"github.com/kvbreaker/kvbreaker"
	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
)

func main() {
	nc, err := natsgo.Connect("nats://127.0.0.1:4222")
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	natsStore, err := kvnats.New(context.Background(), nc, "kvbreaker")
	if err != nil {
		panic(err)
	}
	if _, err := kvbreaker.New(natsStore, kvbreaker.Settings{}); err != nil {
		panic(err)
	}
}
`},
	{step: "postgres", module: repoPath + "/backends/postgres", src: `package main

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
)

func main() {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1/kvbreaker")
	if err != nil {
		panic(err)
	}
	store, err := postgres.New(pool, "kvbreaker_records")
	if err != nil {
		panic(err)
	}
	if _, err := kvbreaker.New(store, kvbreaker.Settings{}); err != nil {
		panic(err)
	}
}
`},
	{step: "redis", module: repoPath + "/backends/redis", src: `package main

import (
	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
)

func main() {
	store, err := redis.New(goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true}))
	if err != nil {
		panic(err)
	}
	if _, err := kvbreaker.New(store, kvbreaker.Settings{}); err != nil {
		panic(err)
	}
}
`},
	{step: "sqlite", module: repoPath + "/backends/sqlite", src: `package main

import (
	"context"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/sqlite"
)

func main() {
	store, err := sqlite.Open(context.Background(), "kvbreaker.db", sqlite.WithCreate(false))
	if err != nil {
		panic(err)
	}
	if _, err := kvbreaker.New(store, kvbreaker.Settings{}); err != nil {
		panic(err)
	}
}
`},
	{step: "otelkvbreaker", module: repoPath + "/otelkvbreaker", run: "observed", src: `package main

import (
	"fmt"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/otelkvbreaker"
)

func main() {
	obs, err := otelkvbreaker.New()
	if err != nil {
		panic(err)
	}
	if _, err := kvbreaker.New(memory.New(), kvbreaker.Settings{Observer: obs}); err != nil {
		panic(err)
	}
	fmt.Println("observed")
}
`},
}

// workVersion is the version go.work's replaces resolve to the checkout:
// the release being prepared.
func workVersion(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return "", err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return "", err
	}
	for _, r := range wf.Replace {
		if r.Old.Path == repoPath && r.Old.Version != "" {
			return r.Old.Version, nil
		}
	}
	return "", errors.New("go.work replaces no version of " + repoPath + ": say -version")
}

// shortName is a module's step name: the last element of its path.
func shortName(p string) string { return path.Base(p) }

func fileInZip(z []byte, mv module.Version, name string) ([]byte, error) {
	return modset.FileOfZip(z, mv, name)
}

func indent(s string) string {
	var b bytes.Buffer
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("     " + l)
		}
	}
	return b.String()
}

// removeAll removes the temporary directory, the module cache's
// read-only directories included.
func removeAll(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.RemoveAll(dir)
}
