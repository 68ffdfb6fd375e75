// Command release prepares and tags a release of every module of the
// repository (go.work's use list) at one version, in dependency order: the
// root module, the backends, otelkvbreaker, then the modules that require
// those (the command, promexample, bench, the test servers, tools).
//
// For each module it sets every requirement on another module of the
// repository to the release's version, removes any replace of one (a
// replace of anything else is an error: consumers ignore it and
// `go install pkg@version` refuses it), and writes into its go.sum the hashes
// those modules will have at their tags, computed from the working tree
// the way a module proxy computes them from the tag (a module's hash depends
// on its go.sum, so modules are hashed after the ones they require). Then
// it commits that and creates the annotated tags (v0.1.0,
// backends/etcd/v0.1.0, …) on the commit. It never pushes: it prints the
// push command.
//
//	go run ./tools/release -version v0.1.0        dry run: what it would change, commit and tag
//	go run ./tools/release -version v0.1.0 -do    change, commit, tag (needs a clean tree)
//	go run ./tools/release -tidy                  go mod tidy every module without the network for ours
//
// -tidy is `go mod tidy` for the nested modules, which outside the
// workspace require versions of this repository's modules that are not
// published yet: it serves the working tree's modules at the versions
// required from a temporary file-system proxy (and a temporary module
// cache, so the real one never holds them), tidies each module in
// dependency order with GOWORK=off, and keeps the go.sum lines of the
// repository's modules as they were.
package main

import (
	"bytes"
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
	"golang.org/x/mod/semver"

	"github.com/kvbreaker/kvbreaker/tools/internal/modset"
)

func main() {
	version := flag.String("version", "", "the release's version (vMAJOR.MINOR.PATCH, major 0 or 1)")
	do := flag.Bool("do", false, "change go.mod/go.sum files, commit and tag (default: print what it would do)")
	tidy := flag.Bool("tidy", false, "go mod tidy every module against the working tree's modules (no release)")
	repo := flag.String("repo", ".", "the repository's root directory")
	flag.Parse()
	root, err := filepath.Abs(*repo)
	if err != nil {
		fatal(err)
	}
	if *tidy {
		if err := tidyAll(root); err != nil {
			fatal(err)
		}
		return
	}
	if err := release(root, *version, *do); err != nil {
		fatal(err)
	}
}

// checkVersion accepts a canonical semantic version of major 0 or 1 (v2
// and later would need /v2 module paths).
func checkVersion(v string) error {
	if v == "" {
		return fmt.Errorf("-version is required (say -version v0.1.0)")
	}
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("-version %q: want a canonical semantic version such as v0.1.0", v)
	}
	if m := semver.Major(v); m != "v0" && m != "v1" {
		return fmt.Errorf("-version %q: major %s needs /%s module paths", v, m, m)
	}
	return nil
}

// release prints (and with do, makes) the release's changes, commit and tags.
func release(root, version string, do bool) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	mods, err := modset.Load(root)
	if err != nil {
		return err
	}
	mods, err = modset.Order(mods)
	if err != nil {
		return err
	}
	if do {
		if st, err := modset.Git(root, "status", "--porcelain"); err != nil {
			return err
		} else if st != "" {
			return fmt.Errorf("the working tree has changes; commit or stash them first:\n%s", st)
		}
	}
	var tags []string
	for _, m := range mods {
		tags = append(tags, m.Tag(version))
	}
	if out, err := modset.Git(root, "tag", "-l", version, "*/"+version); err != nil {
		return err
	} else if out != "" {
		return fmt.Errorf("tags exist already: %s", strings.Join(strings.Fields(out), " "))
	}
	mode := "dry run (-do makes it)"
	if do {
		mode = "making it"
	}
	fmt.Printf("release %s of %d modules, in dependency order; %s\n", version, len(mods), mode)
	// The new content of every go.mod and go.sum, by slash path from the
	// root: a module's zip holds its go.mod and go.sum, and its go.sum
	// needs the hashes of the modules it requires, so the modules are
	// hashed in dependency order over this overlay of the working tree.
	overlay := map[string][]byte{}
	var repoPaths []string
	for _, m := range mods {
		repoPaths = append(repoPaths, m.Path)
	}
	for _, m := range mods {
		var notes []string
		for _, r := range m.File.Require {
			if slices.Contains(repoPaths, r.Mod.Path) && r.Mod.Version != version {
				notes = append(notes, fmt.Sprintf("require %s %s (was %s)", r.Mod.Path, version, r.Mod.Version))
				if err := m.File.AddRequire(r.Mod.Path, version); err != nil {
					return err
				}
			}
		}
		for _, r := range slices.Clone(m.File.Replace) {
			if !slices.Contains(repoPaths, r.Old.Path) {
				return fmt.Errorf("%s: replace %s => %s: consumers ignore it and go install refuses it; remove it", m.GoModPath(root), r.Old.Path, r.New.Path)
			}
			notes = append(notes, fmt.Sprintf("drop replace %s => %s", r.Old.Path, r.New.Path))
			if err := m.File.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
		m.File.Cleanup()
		data, err := m.File.Format()
		if err != nil {
			return err
		}
		if old, err := os.ReadFile(m.GoModPath(root)); err != nil {
			return err
		} else if !bytes.Equal(old, data) {
			overlay[path.Join(m.Dir, "go.mod")] = data
		}
		if len(notes) > 0 {
			fmt.Printf("  %-52s %s\n", m.Path, strings.Join(notes, "; "))
		}
	}
	// go.work resolves the version to the checkout until it is published.
	wdata, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return err
	}
	wf, err := modfile.ParseWork("go.work", wdata, nil)
	if err != nil {
		return err
	}
	var required []string
	for _, m := range mods {
		for _, d := range modset.Deps(m, mods) {
			if !slices.Contains(required, d) {
				required = append(required, d)
			}
		}
	}
	for _, r := range slices.Clone(wf.Replace) {
		if slices.Contains(repoPaths, r.Old.Path) && (r.Old.Version != version || !slices.Contains(required, r.Old.Path)) {
			if err := wf.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
	}
	for _, m := range mods {
		if slices.Contains(required, m.Path) {
			if err := wf.AddReplace(m.Path, version, "./"+m.Dir, ""); err != nil {
				return err
			}
		}
	}
	wf.Cleanup()
	if data := modfile.Format(wf.Syntax); !bytes.Equal(data, wdata) {
		overlay["go.work"] = data
		fmt.Printf("  %-52s replace each required module at %s with its directory\n", "go.work", version)
	}
	sums := map[string][]string{} // module path -> its go.sum lines at version
	for _, m := range mods {
		deps := modset.Deps(m, mods)
		var lines []string
		for _, d := range deps {
			lines = append(lines, sums[d]...)
		}
		sumFile := path.Join(m.Dir, "go.sum")
		old, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(sumFile)))
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		if data := modset.SetSumLines(old, repoPaths, lines); !bytes.Equal(data, old) {
			overlay[sumFile] = data
			fmt.Printf("  %-52s go.sum: the hashes of %s at %s\n", m.Path, strings.Join(deps, ", "), version)
		}
		z, err := modset.ZipFromTree(root, m, version, overlay)
		if err != nil {
			return fmt.Errorf("%s: %v", m.Path, err)
		}
		if sums[m.Path], err = modset.SumLines(m.Path, version, z); err != nil {
			return err
		}
	}
	msg := fmt.Sprintf("release %s: the modules require each other at %s", version, version)
	var files []string
	for f := range overlay {
		files = append(files, f)
	}
	slices.Sort(files)
	if len(files) == 0 {
		fmt.Printf("no file changes; the tags go on HEAD\n")
	} else if do {
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(f)), overlay[f], 0o644); err != nil {
				return err
			}
		}
		if _, err := modset.Git(root, append([]string{"add", "--"}, files...)...); err != nil {
			return err
		}
		if _, err := modset.Git(root, "commit", "-q", "-m", msg); err != nil {
			return err
		}
		fmt.Printf("committed %q\n", msg)
	} else {
		fmt.Printf("would commit %s: %q\n", strings.Join(files, " "), msg)
	}
	for i, m := range mods {
		if do {
			if _, err := modset.Git(root, "tag", "-a", "-m", m.Path+" "+version, tags[i]); err != nil {
				return err
			}
			fmt.Printf("tagged %s\n", tags[i])
		} else {
			fmt.Printf("would tag %s\n", tags[i])
		}
	}
	fmt.Printf("check it: make published; then publish it: git push origin %s\n", strings.Join(tags, " "))
	return nil
}

// tidyAll runs go mod tidy in every module, dependency order, outside the
// workspace, with the repository's modules served from the working tree.
func tidyAll(root string) error {
	mods, err := modset.Load(root)
	if err != nil {
		return err
	}
	if mods, err = modset.Order(mods); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "kvbreaker-tidy-")
	if err != nil {
		return err
	}
	defer func() {
		exec.Command("chmod", "-R", "u+w", tmp).Run() // the module cache is read-only
		os.RemoveAll(tmp)
	}()
	proxy, cache := filepath.Join(tmp, "proxy"), filepath.Join(tmp, "modcache")
	goproxy, err := goEnv("GOPROXY")
	if err != nil {
		return err
	}
	realCache, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	var repoPaths []string
	for _, m := range mods {
		repoPaths = append(repoPaths, m.Path)
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOMODCACHE="+cache,
		// Third-party modules from the real module cache first.
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(realCache, "cache", "download"))+","+goproxy,
		"GONOSUMDB="+mods[0].Path)
	served := map[string]bool{}
	for _, m := range mods {
		// Serve what m requires of ours, at the required version, as the
		// working tree holds it (tidied already: dependency order).
		for _, r := range m.File.Require {
			if !slices.Contains(repoPaths, r.Mod.Path) || served[r.Mod.String()] {
				continue
			}
			dep := mods[slices.IndexFunc(mods, func(o *modset.Module) bool { return o.Path == r.Mod.Path })]
			z, err := modset.ZipFromTree(root, dep, r.Mod.Version, nil)
			if err != nil {
				return err
			}
			if err := modset.AddToProxy(proxy, r.Mod, z, time.Now()); err != nil {
				return err
			}
			served[r.Mod.String()] = true
		}
		dir := filepath.Join(root, filepath.FromSlash(m.Dir))
		sumFile := filepath.Join(dir, "go.sum")
		before, _ := os.ReadFile(sumFile)
		cmd := exec.Command("go", "mod", "tidy")
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: go mod tidy: %v\n%s", m.Path, err, out)
		}
		// Our modules' go.sum lines stay as they were: the temporary
		// proxy's hashes are the working tree's, not a tag's.
		after, _ := os.ReadFile(sumFile)
		var keep []string
		for _, l := range strings.Split(string(before), "\n") {
			if f := strings.Fields(l); len(f) == 3 && slices.Contains(repoPaths, f[0]) {
				keep = append(keep, l)
			}
		}
		if data := modset.SetSumLines(after, repoPaths, keep); !bytes.Equal(data, after) {
			if len(data) == 0 {
				os.Remove(sumFile)
			} else if err := os.WriteFile(sumFile, data, 0o644); err != nil {
				return err
			}
		}
		fmt.Printf("tidied %s\n", m.Path)
		// Reload: tidy may have changed its requirements.
		b, err := os.ReadFile(m.GoModPath(root))
		if err != nil {
			return err
		}
		if m.File, err = modfile.Parse(m.GoModPath(root), b, nil); err != nil {
			return err
		}
	}
	return nil
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}
