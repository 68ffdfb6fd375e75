package kvbreaker_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// uncalled returns the exported identifiers of the packages pkgs (import
// path to directory, below root) that nothing outside their directory
// names, in every Go file below root (tests, examples and other modules
// included), and that no such identifier's signature needs: a type a
// called function returns, a field's type, a method's parameter. Methods
// stand with their type. The package's own files, its tests and examples
// beside it included, do not count: they justify nothing to a caller.
// An interface is justified by a type outside that has all its methods
// (a harness implementing an optional interface names none of it).
func uncalled(t *testing.T, root string, pkgs map[string]string) []string {
	t.Helper()
	fset := token.NewFileSet()
	// decls: each package's exported top-level identifiers, with the
	// unqualified identifiers their signature or type names.
	decls := map[string]map[string][]string{}
	used := map[string]map[string]bool{}
	ifaces := map[string]map[string][]string{}
	for p := range pkgs {
		decls[p], used[p], ifaces[p] = map[string][]string{}, map[string]bool{}, map[string][]string{}
	}
	// methods: the method names of each receiver type outside the packages,
	// by directory and type.
	methods := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); file != root && (n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(file, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(file))
		if err != nil {
			return err
		}
		for p, dir := range pkgs {
			if filepath.Clean(dir) != rel {
				continue
			}
			if !strings.HasSuffix(file, "_test.go") {
				declared(f, decls[p], ifaces[p])
			}
			return nil
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
				if recv := receiver(fd); recv != "" {
					k := rel + "." + recv
					if methods[k] == nil {
						methods[k] = map[string]bool{}
					}
					methods[k][fd.Name.Name] = true
				}
			}
		}
		// A file outside every package: what it names of each.
		names := map[string]string{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if _, ok := pkgs[p]; !ok {
				continue
			}
			name := path.Base(p)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] != "" {
					used[names[x.Name]][sel.Sel.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p, ds := range decls {
		for n, ms := range ifaces[p] {
			for _, have := range methods {
				if len(ms) > 0 && !slices.ContainsFunc(ms, func(m string) bool { return !have[m] }) {
					used[p][n] = true
				}
			}
		}
		// What a used identifier's signature names is used too.
		queue := slices.Collect(maps.Keys(used[p]))
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			for _, m := range ds[n] {
				if !used[p][m] {
					used[p][m] = true
					queue = append(queue, m)
				}
			}
		}
		for n := range ds {
			if !used[p][n] {
				out = append(out, p+"."+n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// declared adds f's exported top-level identifiers to ds, each with the
// unqualified identifiers its type or signature names; an exported
// method's signature is added to its receiver type's. ifaces gets each
// exported interface's method names.
func declared(f *ast.File, ds map[string][]string, ifaces map[string][]string) {
	idents := func(n ast.Node) []string {
		var out []string
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				return false // another package's
			case *ast.Ident:
				if ast.IsExported(n.Name) {
					out = append(out, n.Name)
				}
			case *ast.BlockStmt:
				return false // a body: what it calls is no signature's
			}
			return true
		})
		return out
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			sig := idents(d.Type)
			if d.Recv == nil {
				ds[d.Name.Name] = append(ds[d.Name.Name], sig...)
				continue
			}
			if recv := receiver(d); ast.IsExported(recv) {
				ds[recv] = append(ds[recv], sig...)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						ds[s.Name.Name] = append(ds[s.Name.Name], exportedParts(s.Type, idents)...)
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									ifaces[s.Name.Name] = append(ifaces[s.Name.Name], n.Name)
								}
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							var ty []string
							if s.Type != nil {
								ty = idents(s.Type)
							}
							ds[n.Name] = append(ds[n.Name], ty...)
						}
					}
				}
			}
		}
	}
}

// receiver is the name of fd's receiver type, or "".
func receiver(fd *ast.FuncDecl) string {
	recv := fd.Recv.List[0].Type
	if s, ok := recv.(*ast.StarExpr); ok {
		recv = s.X
	}
	switch r := recv.(type) {
	case *ast.IndexExpr:
		recv = r.X
	case *ast.IndexListExpr:
		recv = r.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// exportedParts is what a type's exported fields and methods name (an
// unexported field's type is nobody's to call).
func exportedParts(ty ast.Expr, idents func(ast.Node) []string) []string {
	var fields *ast.FieldList
	switch ty := ty.(type) {
	case *ast.StructType:
		fields = ty.Fields
	case *ast.InterfaceType:
		fields = ty.Methods
	default:
		return idents(ty)
	}
	var out []string
	for _, f := range fields.List {
		exported := len(f.Names) == 0 // embedded
		for _, n := range f.Names {
			exported = exported || n.IsExported()
		}
		if exported {
			out = append(out, idents(f.Type)...)
		}
	}
	return out
}

// publicPackages are the root module's packages whose every exported
// identifier a caller outside them must justify.
var publicPackages = map[string]string{
	"github.com/kvbreaker/kvbreaker":             ".",
	"github.com/kvbreaker/kvbreaker/driver":      "driver",
	"github.com/kvbreaker/kvbreaker/adapter":     "adapter",
	"github.com/kvbreaker/kvbreaker/conformance": "conformance",
}

// TestSurfaceHasCallers: every exported identifier of publicPackages is
// named by code outside its package (a backend, the command, a test or an
// example of another package), or a named one's signature needs it.
func TestSurfaceHasCallers(t *testing.T) {
	for _, id := range uncalled(t, ".", publicPackages) {
		t.Errorf("%s: no caller outside its package names it, nor needs it in a signature: unexport it", id)
	}
}

// TestSurfaceHasCallersControl: in a tree of two packages, the one
// function nothing outside calls is reported; the function called, the
// type its result needs, that type's method and the interface a type
// outside implements are not; an interface half implemented is.
func TestSurfaceHasCallersControl(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("lib/lib.go", `package lib
type Result struct{ Parts []Part }
type Part int
func (Result) Size() Size { return 0 }
type Size int
func Make() Result { return Result{} }
func Spare() {}
const Unused = 1
type Plugin interface{ Plug() }
type Orphan interface{ Plug(); Unplug() }
`)
	write("lib/lib_test.go", `package lib_test
import "example.com/m/lib"
func use() { lib.Spare(); _ = lib.Unused }
`)
	write("app/app.go", `package app
import l "example.com/m/lib"
func run() { l.Make() }
type plug struct{}
func (plug) Plug() {}
`)
	got := uncalled(t, dir, map[string]string{"example.com/m/lib": "lib"})
	want := []string{"example.com/m/lib.Orphan", "example.com/m/lib.Spare", "example.com/m/lib.Unused"}
	if !slices.Equal(got, want) {
		t.Errorf("uncalled = %v, want %v", got, want)
	}
}
