package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The demo program as make demo builds it: in the root module (rootDir),
// with demoEnv.
const (
	demoPkg = "./internal/demo"
	rootDir = "../.."
)

// demoEnv is the environment make demo runs the demo build in (the
// Makefile's demo target): without cgo, which only the host resolver and
// user lookup use, neither of which a simulation calls; and outside the
// workspace, so that a first run loads only the root module's
// requirements (TestDemoLoadsOnlyRootRequirements); and with the tag that
// leaves out kvbreaker.HostKey, which the simulator never calls, and its
// IDNA tables (golang.org/x/net, golang.org/x/text: TestDemoBuildHasNoSDK).
var demoEnv = []string{"GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-tags=kvbreaker_nohostkey"}

// fullCmd is the full command, kvbreaker with every backend, built in the
// workspace: the controls' build.
const fullCmd = "./cmd/kvbreaker"

// goList runs go list args in dir with env (KEY=value, added to the
// test's) and returns its output's fields.
func goList(t *testing.T, dir string, env []string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v (in %s, %v): %v\n%s", args, dir, env, err, out)
	}
	return strings.Fields(string(out))
}

// depModules are the modules whose packages `go list -deps` finds in the
// build of pkg, in dir with env.
func depModules(t *testing.T, dir, pkg string, env ...string) []string {
	t.Helper()
	var mods []string
	for _, m := range goList(t, dir, env, "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", pkg) {
		if !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	return mods
}

// demoModules are the only modules the make demo build may compile: the
// root module and pflag for the flags. Not HostKey's golang.org/x/net and
// golang.org/x/text (demoEnv's tag leaves HostKey out). Not cobra: its
// templates and their reflection cost a first build more CPU time than
// the simulator's own packages.
var demoModules = []string{
	"github.com/kvbreaker/kvbreaker",
	"github.com/spf13/pflag",
}

// TestDemoBuildHasNoSDK keeps make demo's first run short: its build
// compiles no backend, no SDK and no cobra. The full command is the
// control: it must hold modules outside the list, cobra among them, or
// the check could not fail.
func TestDemoBuildHasNoSDK(t *testing.T) {
	var extra []string
	for _, m := range depModules(t, rootDir, demoPkg, demoEnv...) {
		if !slices.Contains(demoModules, m) {
			extra = append(extra, m)
		}
	}
	if len(extra) > 0 {
		t.Errorf("the demo build (make demo, %s, %v) compiles %v: keep its import out of internal/simulate and what it imports (golang.org/x/net and x/text are HostKey's, which demoEnv's tag leaves out)", demoPkg, demoEnv, extra)
	}
	var full []string
	for _, m := range depModules(t, rootDir, fullCmd) {
		if !slices.Contains(demoModules, m) {
			full = append(full, m)
		}
	}
	for _, want := range []string{"github.com/spf13/cobra", "github.com/aws/aws-sdk-go-v2", "go.etcd.io/etcd/client/v3", "github.com/kvbreaker/kvbreaker/backends/redis"} {
		if !slices.Contains(full, want) {
			t.Errorf("the full build does not compile %s (it compiles %v beyond the demo's list): the control cannot show the check failing", want, full)
		}
	}
	// The tag's control: without it the same build compiles HostKey's
	// IDNA modules.
	untagged := depModules(t, rootDir, demoPkg, "GOWORK=off", "CGO_ENABLED=0")
	for _, want := range []string{"golang.org/x/net", "golang.org/x/text"} {
		if !slices.Contains(untagged, want) {
			t.Errorf("the demo build without kvbreaker_nohostkey compiles only %v: the tag's control cannot show the check failing", untagged)
		}
	}
}

// downloadedModules loads pkg's packages (go list -deps) in dir with env
// and an empty module cache, filled from this machine's module cache as a
// file-system proxy (no network), and returns the module paths whose
// go.mod or zip that first run fetched.
func downloadedModules(t *testing.T, dir, pkg string, env ...string) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	proxy := filepath.Join(strings.TrimSpace(string(out)), "cache", "download")
	fresh := t.TempDir()
	env = append(slices.Clone(env), "GOMODCACHE="+fresh, "GOPROXY=file://"+filepath.ToSlash(proxy), "GOSUMDB=off", "GOFLAGS=-modcacherw")
	goList(t, dir, env, "-deps", pkg)
	var mods []string
	root := filepath.Join(fresh, "cache", "download")
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(path)) != "@v" || !(strings.HasSuffix(path, ".mod") || strings.HasSuffix(path, ".zip")) {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(filepath.Dir(path)))
		if m := filepath.ToSlash(rel); !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(mods)
	return mods
}

// TestDemoLoadsOnlyRootRequirements keeps the first run of make demo from
// spending its time on downloads: from an empty module cache, its build
// fetches the go.mod or zip of no module beyond the root module's own
// requirements. The control is the same build in the workspace (without
// GOWORK=off), which loads the go.mod of every workspace module's
// requirements: it must fetch modules outside the list, or the check
// could not fail.
func TestDemoLoadsOnlyRootRequirements(t *testing.T) {
	if testing.Short() {
		t.Skip("fills two module caches (-short)")
	}
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = rootDir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json in %s: %v", rootDir, err)
	}
	var mod struct{ Require []struct{ Path string } }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatalf("go mod edit -json in %s: %v", rootDir, err)
	}
	var reqs []string
	for _, r := range mod.Require {
		reqs = append(reqs, r.Path)
	}
	var extra []string
	got := downloadedModules(t, rootDir, demoPkg, demoEnv...)
	for _, m := range got {
		if !slices.Contains(reqs, m) {
			extra = append(extra, m)
		}
	}
	if len(extra) > 0 {
		t.Errorf("make demo's first run (%s in %s, %v) fetches %v beyond the root module's requirements %v: build it outside the workspace", demoPkg, rootDir, demoEnv, extra, reqs)
	}
	t.Logf("make demo's first run fetches %d modules: %v", len(got), got)
	ws := downloadedModules(t, rootDir, demoPkg, "CGO_ENABLED=0")
	n := 0
	for _, m := range ws {
		if !slices.Contains(reqs, m) {
			n++
		}
	}
	if n == 0 {
		t.Errorf("the same build in the workspace fetches only %v: the control cannot show the check failing", ws)
	}
	t.Logf("in the workspace it fetches %d modules, %d beyond the root's requirements", len(ws), n)
}

// depPackages are the packages `go list -deps` finds in the build of pkg
// in dir with env.
func depPackages(t *testing.T, dir, pkg string, env ...string) []string {
	t.Helper()
	return goList(t, dir, env, "-deps", pkg)
}

// slowStdPackages are standard-library packages that the simulator does
// not need and that cost much of a first build from an empty build cache:
// TLS and its certificates (crypto/tls pulls in every cipher, curve and
// the FIPS module), HTTP, cgo (runtime/cgo compiles C with gcc), and
// text/template (cobra's help; its reflection-heavy packages).
var slowStdPackages = []string{"crypto/tls", "crypto/x509", "net/http", "runtime/cgo", "text/template"}

// TestDemoBuildIsSmall keeps make demo's first build from an empty build
// cache short: built as make demo builds it, the demo compiles none of
// slowStdPackages. The controls are the full command (TLS to its stores,
// cobra's templates) and the demo with cgo: each must hold some of them,
// or the check could not fail.
func TestDemoBuildIsSmall(t *testing.T) {
	slow := func(pkgs []string) []string {
		var found []string
		for _, p := range slowStdPackages {
			if slices.Contains(pkgs, p) {
				found = append(found, p)
			}
		}
		return found
	}
	mk, err := os.ReadFile(filepath.Join(rootDir, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	recipe, ok := demoRecipe(string(mk))
	if !ok {
		t.Fatal("the Makefile has no demo target")
	}
	for _, e := range append(slices.Clone(demoEnv), "run "+demoPkg) {
		if !strings.Contains(recipe, e) {
			t.Errorf("the Makefile's demo target (%q) does not hold %s, the build this test checks", recipe, e)
		}
	}
	if got := slow(depPackages(t, rootDir, demoPkg, demoEnv...)); len(got) > 0 {
		t.Errorf("make demo's build (%s, %v) compiles %v: find the import with go list -deps -f '{{.ImportPath}}: {{.Imports}}' and move it out of the packages the simulator imports", demoPkg, demoEnv, got)
	}
	if got := slow(depPackages(t, rootDir, fullCmd, "CGO_ENABLED=0")); !slices.Contains(got, "crypto/tls") || !slices.Contains(got, "net/http") || !slices.Contains(got, "text/template") {
		t.Errorf("the full command compiles only %v of %v: the control cannot show the check failing", got, slowStdPackages)
	}
	if got := slow(depPackages(t, rootDir, demoPkg, "GOWORK=off", "CGO_ENABLED=1")); !slices.Contains(got, "runtime/cgo") {
		t.Errorf("the demo build with cgo compiles only %v of %v: the control cannot show the check failing", got, slowStdPackages)
	}
}

// demoRecipe is the first command line of the Makefile's demo target.
func demoRecipe(makefile string) (string, bool) {
	_, after, ok := strings.Cut(makefile, "\ndemo:\n")
	if !ok {
		return "", false
	}
	line, _, _ := strings.Cut(after, "\n")
	return strings.TrimSpace(line), true
}
