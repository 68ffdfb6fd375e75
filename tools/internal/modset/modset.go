// Package modset reads the repository's modules (go.work's use list and
// each go.mod), orders them by their requirements on each other, and makes
// module zips and go.sum hashes the way a module proxy serves them: from a
// git revision (git archive, as the go command does) or from the working
// tree's tracked files. tools/release and tools/published share it.
package modset

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// Module is one module of the repository.
type Module struct {
	Dir  string // slash path from the repository root, "" for the root module
	Path string // module path
	File *modfile.File
}

// Tag is the git tag of m at version: "v0.1.0" for the root module,
// "backends/etcd/v0.1.0" for a nested one.
func (m *Module) Tag(version string) string {
	if m.Dir == "" {
		return version
	}
	return m.Dir + "/" + version
}

// GoModPath is m's go.mod file under the repository root.
func (m *Module) GoModPath(root string) string {
	return filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod")
}

// Load reads the modules go.work uses, in go.work's order.
func Load(root string) ([]*Module, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	var mods []*Module
	for _, u := range wf.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		if dir == "." {
			dir = ""
		}
		if strings.HasPrefix(dir, "../") || path.IsAbs(dir) {
			return nil, fmt.Errorf("go.work uses %s, outside the repository", u.Path)
		}
		m := &Module{Dir: dir}
		gm := m.GoModPath(root)
		b, err := os.ReadFile(gm)
		if err != nil {
			return nil, err
		}
		if m.File, err = modfile.Parse(gm, b, nil); err != nil {
			return nil, err
		}
		if m.File.Module == nil {
			return nil, fmt.Errorf("%s: no module line", gm)
		}
		m.Path = m.File.Module.Mod.Path
		mods = append(mods, m)
	}
	if len(mods) == 0 || mods[0].Dir != "" && !slices.ContainsFunc(mods, func(m *Module) bool { return m.Dir == "" }) {
		return nil, errors.New("go.work does not use the root module (.)")
	}
	return mods, nil
}

// Deps are the repository's module paths m requires.
func Deps(m *Module, mods []*Module) []string {
	var deps []string
	for _, r := range m.File.Require {
		if slices.ContainsFunc(mods, func(o *Module) bool { return o.Path == r.Mod.Path }) {
			deps = append(deps, r.Mod.Path)
		}
	}
	return deps
}

// Order sorts mods so that every module comes after the modules of the
// repository it requires (the root first, the command after the
// backends); ties keep go.work's order. A requirement cycle is an error.
func Order(mods []*Module) ([]*Module, error) {
	var out []*Module
	done := map[string]bool{}
	for len(out) < len(mods) {
		progress := false
		for _, m := range mods {
			if done[m.Path] {
				continue
			}
			if !slices.ContainsFunc(Deps(m, mods), func(d string) bool { return !done[d] }) {
				out = append(out, m)
				done[m.Path] = true
				progress = true
			}
		}
		if !progress {
			var left []string
			for _, m := range mods {
				if !done[m.Path] {
					left = append(left, m.Path)
				}
			}
			return nil, fmt.Errorf("the requirements of %s form a cycle", strings.Join(left, ", "))
		}
	}
	return out, nil
}

// Git runs git in dir and returns its trimmed standard output.
func Git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// ZipFromGit is the module zip of m at version from the repository's
// revision rev, made as the go command makes it from a tag (git archive).
func ZipFromGit(root string, m *Module, version, rev string) ([]byte, error) {
	var buf bytes.Buffer
	if err := modzip.CreateFromVCS(&buf, module.Version{Path: m.Path, Version: version}, root, rev, m.Dir); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ZipFromTree is the module zip of m at version from the working tree:
// the files git tracks (git ls-files) with their current content, where
// overlay (slash paths from the repository root) holds the content of
// files about to be written, tracked or not. It is what a commit of the
// working tree would make the zip.
func ZipFromTree(root string, m *Module, version string, overlay map[string][]byte) ([]byte, error) {
	out, err := Git(root, "ls-files", "-z", "--", orDot(m.Dir))
	if err != nil {
		return nil, err
	}
	names := strings.Split(strings.Trim(out, "\x00"), "\x00")
	for n := range overlay {
		names = append(names, n)
	}
	prefix := ""
	if m.Dir != "" {
		prefix = m.Dir + "/"
	}
	var files []modzip.File
	seen := map[string]bool{}
	for _, n := range names {
		rel, ok := strings.CutPrefix(n, prefix)
		if n == "" || !ok || seen[rel] {
			continue
		}
		seen[rel] = true
		if data, ok := overlay[n]; ok {
			files = append(files, dataFile{rel: rel, data: data})
			continue
		}
		p := filepath.Join(root, filepath.FromSlash(n))
		info, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		} else if err != nil {
			return nil, err
		}
		files = append(files, treeFile{rel: rel, path: p, info: info})
	}
	var buf bytes.Buffer
	if err := modzip.Create(&buf, module.Version{Path: m.Path, Version: version}, files); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func orDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

type treeFile struct {
	rel, path string
	info      os.FileInfo
}

func (f treeFile) Path() string                 { return f.rel }
func (f treeFile) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f treeFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }

type dataFile struct {
	rel  string
	data []byte
}

func (f dataFile) Path() string                 { return f.rel }
func (f dataFile) Lstat() (os.FileInfo, error)  { return dataInfo{f}, nil }
func (f dataFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type dataInfo struct{ f dataFile }

func (i dataInfo) Name() string       { return path.Base(i.f.rel) }
func (i dataInfo) Size() int64        { return int64(len(i.f.data)) }
func (i dataInfo) Mode() os.FileMode  { return 0o644 }
func (i dataInfo) ModTime() time.Time { return time.Time{} }
func (i dataInfo) IsDir() bool        { return false }
func (i dataInfo) Sys() any           { return nil }

// HashZip is the go.sum hash of a module zip ("h1:…").
func HashZip(z []byte) (string, error) {
	r, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return "", err
	}
	var names []string
	files := map[string]*zip.File{}
	for _, f := range r.File {
		names = append(names, f.Name)
		files[f.Name] = f
	}
	return dirhash.Hash1(names, func(n string) (io.ReadCloser, error) { return files[n].Open() })
}

// HashGoMod is the go.sum hash of a go.mod file ("h1:…", the line
// "path version/go.mod h1:…").
func HashGoMod(data []byte) (string, error) {
	return dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

// GoModOfZip is the go.mod file inside a module zip.
func GoModOfZip(z []byte, mv module.Version) ([]byte, error) {
	return FileOfZip(z, mv, "go.mod")
}

// FileOfZip is the file name (a slash path in the module) of a module zip.
func FileOfZip(z []byte, mv module.Version, name string) ([]byte, error) {
	r, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return nil, err
	}
	f, err := r.Open(mv.Path + "@" + mv.Version + "/" + name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// AddToProxy writes module version mv into the file-system module proxy
// at dir (GOPROXY=file://dir): its .info, .mod, .zip and list.
func AddToProxy(dir string, mv module.Version, z []byte, at time.Time) error {
	ep, err := module.EscapePath(mv.Path)
	if err != nil {
		return err
	}
	ev, err := module.EscapeVersion(mv.Version)
	if err != nil {
		return err
	}
	gomod, err := GoModOfZip(z, mv)
	if err != nil {
		return err
	}
	d := filepath.Join(dir, filepath.FromSlash(ep), "@v")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{mv.Version, at.UTC()})
	list, _ := os.ReadFile(filepath.Join(d, "list"))
	if !slices.Contains(strings.Fields(string(list)), mv.Version) {
		list = append(list, mv.Version+"\n"...)
	}
	for name, data := range map[string][]byte{ev + ".info": info, ev + ".mod": gomod, ev + ".zip": z, "list": list} {
		if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// SumLines are m's go.sum lines at version: the zip's and the go.mod's.
func SumLines(path, version string, z []byte) ([]string, error) {
	hz, err := HashZip(z)
	if err != nil {
		return nil, err
	}
	gomod, err := GoModOfZip(z, module.Version{Path: path, Version: version})
	if err != nil {
		return nil, err
	}
	hm, err := HashGoMod(gomod)
	if err != nil {
		return nil, err
	}
	return []string{path + " " + version + " " + hz, path + " " + version + "/go.mod " + hm}, nil
}

// SetSumLines rewrites a go.sum's content: every line of a module in
// paths goes, lines are added, and the result is in the go command's order
// (module.Sort of path and version).
func SetSumLines(gosum []byte, paths []string, lines []string) []byte {
	type entry struct {
		mv   module.Version
		line string
	}
	var es []entry
	seen := map[string]bool{}
	for _, l := range append(strings.Split(string(gosum), "\n"), lines...) {
		f := strings.Fields(l)
		if len(f) != 3 || seen[l] || slices.Contains(paths, f[0]) && !slices.Contains(lines, l) {
			continue
		}
		seen[l] = true
		es = append(es, entry{module.Version{Path: f[0], Version: f[1]}, l})
	}
	slices.SortStableFunc(es, func(a, b entry) int {
		switch {
		case a.mv == b.mv:
			return 0
		case lessMV(a.mv, b.mv):
			return -1
		}
		return 1
	})
	var b strings.Builder
	for _, e := range es {
		b.WriteString(e.line + "\n")
	}
	return []byte(b.String())
}

func lessMV(a, b module.Version) bool {
	s := []module.Version{b, a}
	module.Sort(s)
	return s[0] == a
}
