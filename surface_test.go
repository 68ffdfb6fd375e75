package kvbreaker_test

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// maxRootSurface bounds the root package's exported identifiers: what a
// newcomer reads on its documentation page.
const maxRootSurface = 50

// surface lists the exported identifiers of the package in dir (its
// non-test files) one by one as go/doc groups them: each constant,
// variable, function and type, a type's constructors and the constants
// and variables go/doc files under it included, methods apart.
func surface(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	d, err := doc.NewFromFiles(fset, files, dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	values := func(kind string, vs []*doc.Value) {
		for _, v := range vs {
			for _, n := range v.Names {
				if ast.IsExported(n) {
					ids = append(ids, kind+" "+n)
				}
			}
		}
	}
	values("const", d.Consts)
	values("var", d.Vars)
	for _, f := range d.Funcs {
		ids = append(ids, "func "+f.Name)
	}
	for _, ty := range d.Types {
		ids = append(ids, "type "+ty.Name)
		values("const", ty.Consts)
		values("var", ty.Vars)
		for _, f := range ty.Funcs {
			ids = append(ids, "func "+f.Name)
		}
	}
	return ids
}

// TestRootSurface: the root package exports at most maxRootSurface
// identifiers (go test -run TestRootSurface -v . lists them), and
// docs/DESIGN.md's table states each package's count as it is. The
// negative control is a package of maxRootSurface+1 identifiers, with
// methods, unexported names and a test file beside them, which the count
// puts above the bound.
func TestRootSurface(t *testing.T) {
	root := surface(t, ".")
	t.Logf("root: %d exported identifiers:\n%s", len(root), strings.Join(root, "\n"))
	if len(root) > maxRootSurface {
		t.Errorf("the root package exports %d identifiers, more than %d: unexport what no caller outside the package needs, or document a value on a Settings field instead of a constant", len(root), maxRootSurface)
	}

	design, err := os.ReadFile(filepath.Join("docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z/]+)`[^|]*\\| ([0-9]+) \\|")
	stated := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(string(design), -1) {
		stated[m[1]], _ = strconv.Atoi(m[2])
	}
	for _, pkg := range []struct{ name, dir string }{{"kvbreaker", "."}, {"driver", "driver"}, {"adapter", "adapter"}, {"conformance", "conformance"}} {
		n := len(surface(t, pkg.dir))
		if got, ok := stated[pkg.name]; !ok || got != n {
			t.Errorf("docs/DESIGN.md states %d exported identifiers for `%s` (found: %v); it has %d: correct the table", got, pkg.name, ok, n)
		}
	}

	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("package big\n\ntype T int\n\nfunc (T) Method() {}\n\nconst hidden = 0\n\n")
	for i := range maxRootSurface {
		fmt.Fprintf(&src, "const C%d T = %d\n", i, i) // filed under T by go/doc
	}
	if err := os.WriteFile(filepath.Join(dir, "big.go"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big_test.go"), []byte("package big\n\nconst Extra = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := len(surface(t, dir)); n != maxRootSurface+1 {
		t.Errorf("negative control: a package of %d exported identifiers counted %d", maxRootSurface+1, n)
	}
}
