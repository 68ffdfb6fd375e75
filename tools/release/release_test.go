package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/tools/internal/modset"
)

// fixture writes a repository of three modules: the root, a (requires the
// root) and b (requires a and the root), wired with replace directives in
// their go.mod files, which release removes.
func fixture(t *testing.T, extraB string) string {
	t.Helper()
	for _, kv := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(kv, "release test")
	}
	for _, kv := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(kv, "release@kvbreaker.invalid")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.work":   "go 1.26.0\n\nuse (\n\t.\n\t./b\n\t./a\n)\n",
		"go.mod":    "module example.com/r\n\ngo 1.26.0\n",
		"r.go":      "package r\n\nconst X = 1\n",
		"a/go.mod":  "module example.com/r/a\n\ngo 1.26.0\n\nrequire example.com/r v0.0.0\n\nreplace example.com/r => ../\n",
		"a/a.go":    "package a\n\nimport \"example.com/r\"\n\nconst Y = r.X\n",
		"b/go.mod":  "module example.com/r/b\n\ngo 1.26.0\n\nrequire (\n\texample.com/r v0.0.0\n\texample.com/r/a v0.0.0\n)\n\nreplace example.com/r => ../\n\nreplace example.com/r/a => ../a\n" + extraB,
		"b/main.go": "package main\n\nimport (\n\t\"example.com/r\"\n\t\"example.com/r/a\"\n)\n\nfunc main() { println(r.X, a.Y) }\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "fixture"}} {
		if _, err := modset.Git(dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReleaseTagsInDependencyOrder(t *testing.T) {
	dir := fixture(t, "")
	head, _ := modset.Git(dir, "rev-parse", "HEAD")
	// A dry run changes nothing.
	if err := release(dir, "v0.1.0", false); err != nil {
		t.Fatal(err)
	}
	if st, _ := modset.Git(dir, "status", "--porcelain"); st != "" {
		t.Fatalf("the dry run changed the tree:\n%s", st)
	}
	if h, _ := modset.Git(dir, "rev-parse", "HEAD"); h != head {
		t.Fatal("the dry run committed")
	}
	if tags, _ := modset.Git(dir, "tag"); tags != "" {
		t.Fatalf("the dry run tagged %s", tags)
	}

	if err := release(dir, "v0.1.0", true); err != nil {
		t.Fatal(err)
	}
	tags, _ := modset.Git(dir, "tag")
	if got := strings.Fields(tags); !slices.Equal(got, []string{"a/v0.1.0", "b/v0.1.0", "v0.1.0"}) {
		t.Fatalf("tags %q", got)
	}
	// go.work lists b before a; b requires a.
	mods, err := modset.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if mods, err = modset.Order(mods); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range mods {
		order = append(order, m.Path)
	}
	if !slices.Equal(order, []string{"example.com/r", "example.com/r/a", "example.com/r/b"}) {
		t.Fatalf("dependency order %q", order)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "b", "go.mod"))
	if strings.Contains(string(b), "replace") || !strings.Contains(string(b), "example.com/r v0.1.0") || !strings.Contains(string(b), "example.com/r/a v0.1.0") {
		t.Fatalf("b/go.mod:\n%s", b)
	}
	work, _ := os.ReadFile(filepath.Join(dir, "go.work"))
	if !strings.Contains(string(work), "example.com/r v0.1.0 => ./") || !strings.Contains(string(work), "example.com/r/a v0.1.0 => ./a") {
		t.Fatalf("go.work:\n%s", work)
	}
	// b's go.sum holds what a proxy serves from the tags.
	sum, _ := os.ReadFile(filepath.Join(dir, "b", "go.sum"))
	for _, m := range []*modset.Module{{Dir: "", Path: "example.com/r"}, {Dir: "a", Path: "example.com/r/a"}} {
		z, err := modset.ZipFromGit(dir, m, "v0.1.0", m.Tag("v0.1.0"))
		if err != nil {
			t.Fatal(err)
		}
		lines, err := modset.SumLines(m.Path, "v0.1.0", z)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if !strings.Contains(string(sum), l+"\n") {
				t.Errorf("b/go.sum lacks %q:\n%s", l, sum)
			}
		}
	}
	if st, _ := modset.Git(dir, "status", "--porcelain"); st != "" {
		t.Fatalf("the release left changes:\n%s", st)
	}
	// Tags exist now: a second run refuses.
	if err := release(dir, "v0.1.0", true); err == nil || !strings.Contains(err.Error(), "tags exist") {
		t.Fatalf("second release: %v", err)
	}
}

func TestReleaseRefuses(t *testing.T) {
	dir := fixture(t, "\nreplace example.com/other => ../other\n")
	if err := release(dir, "v0.1.0", false); err == nil || !strings.Contains(err.Error(), "replace example.com/other") {
		t.Errorf("a replace of another module: %v", err)
	}
	for _, v := range []string{"", "0.1.0", "v0.1", "v2.0.0", "v0.1.0+meta"} {
		if err := release(dir, v, false); err == nil {
			t.Errorf("version %q accepted", v)
		}
	}
	os.WriteFile(filepath.Join(dir, "r.go"), []byte("package r\n"), 0o644)
	if err := release(dir, "v0.1.0", true); err == nil || !strings.Contains(err.Error(), "changes") {
		t.Errorf("a dirty tree: %v", err)
	}
}
