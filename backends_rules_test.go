package kvbreaker_test

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// backendRules checks the package in dir against the rule docs/backends.md
// states as "One way per concept" and returns what breaks it, one line
// each, prefixed with the package's name:
//   - a Store type with a Close method, and an exported ErrClosed;
//   - a String method on Store, which names its deployment;
//   - constructors of *Store named New, Open or Dial… (DialCluster);
//   - TLS configuration as an option, never a constructor's parameter;
//   - every function that returns an Option named With…; an option that
//     takes a clock (func() time.Time) named WithClock;
//   - at most one exported dial timeout constant: not both ConnectTimeout
//     and DefaultDialTimeout.
func backendRules(t *testing.T, dir string) []string {
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
	d, err := doc.NewFromFiles(fset, files, "example.com/"+filepath.Base(dir))
	if err != nil {
		t.Fatal(err)
	}
	var broken []string
	bad := func(format string, a ...any) { broken = append(broken, d.Name+": "+fmt.Sprintf(format, a...)) }

	values := map[string]bool{}
	addValues := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, n := range v.Names {
				values[n] = true
			}
		}
	}
	addValues(d.Consts)
	addValues(d.Vars)
	types := map[string]*doc.Type{}
	for _, ty := range d.Types {
		types[ty.Name] = ty
		addValues(ty.Consts)
		addValues(ty.Vars)
	}

	store := types["Store"]
	if store == nil {
		bad("no type Store")
	} else {
		if !slices.ContainsFunc(store.Methods, func(f *doc.Func) bool { return f.Name == "Close" }) {
			bad("Store has no Close method")
		}
		if !slices.ContainsFunc(store.Methods, func(f *doc.Func) bool { return f.Name == "String" }) {
			bad("Store has no String method: name the deployment it reaches, without credentials")
		}
		for _, f := range store.Funcs {
			if f.Name != "New" && f.Name != "Open" && !strings.HasPrefix(f.Name, "Dial") {
				bad("constructor %s: name it New (over a client the caller made), Dial… (the Store makes and owns the client) or Open (a local file)", f.Name)
			}
			for _, p := range f.Decl.Type.Params.List {
				if typeString(p.Type) == "*tls.Config" {
					bad("constructor %s takes a *tls.Config: make TLS an option, WithTLSConfig", f.Name)
				}
			}
		}
	}
	if !values["ErrClosed"] {
		bad("no ErrClosed: export the error a call to a closed Store matches")
	}
	if values["ConnectTimeout"] && values["DefaultDialTimeout"] {
		bad("exports both ConnectTimeout and DefaultDialTimeout: export one dial timeout")
	}

	var optionFuncs []*doc.Func
	if opt := types["Option"]; opt != nil {
		optionFuncs = opt.Funcs
	}
	for _, f := range optionFuncs {
		if !strings.HasPrefix(f.Name, "With") {
			bad("option %s: name it With…", f.Name)
		}
		for _, p := range f.Decl.Type.Params.List {
			if typeString(p.Type) == "func() time.Time" && f.Name != "WithClock" {
				bad("option %s takes a clock: name it WithClock", f.Name)
			}
		}
	}
	return broken
}

// typeString prints a parameter's type as it is written.
func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + typeString(e.X)
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	case *ast.FuncType:
		if len(e.Params.List) == 0 && e.Results != nil && len(e.Results.List) == 1 {
			return "func() " + typeString(e.Results.List[0].Type)
		}
	}
	return fmt.Sprintf("%T", e)
}

// backendRuleExceptions are the breaks of the rule that remain, each with
// why it is not mended yet. The test fails on a break not listed here and
// on a listed one that no longer occurs, so that the list only shrinks.
var backendRuleExceptions = map[string]string{}

// TestBackendsOneWayPerConcept holds every package under backends/ to the
// rule docs/backends.md states ("One way per concept across backends"),
// less backendRuleExceptions. The negative control is a package that breaks
// each part of the rule once, in which every break is found, beside one
// that keeps it, in which none is.
func TestBackendsOneWayPerConcept(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("backends", "*"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	n := 0
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		n++
		for _, b := range backendRules(t, dir) {
			found[b] = true
			if _, ok := backendRuleExceptions[b]; !ok {
				t.Errorf("%s (docs/backends.md, \"One way per concept across backends\")", b)
			}
		}
	}
	if n < 9 {
		t.Errorf("checked %d packages under backends/, want the nine backends", n)
	}
	for b := range backendRuleExceptions {
		if !found[b] {
			t.Errorf("backendRuleExceptions lists %q, which no longer occurs: remove it", b)
		}
	}

	good := `package good

import (
	"context"
	"crypto/tls"
	"errors"
	"time"
)

const DefaultDialTimeout = 5 * time.Second

var ErrClosed = errors.New("store closed")

type Store struct{}

func (*Store) Close() error { return nil }

func (*Store) String() string { return "good" }

type options struct{}

type Option func(*options)

func WithClock(now func() time.Time) Option   { return nil }
func WithTLSConfig(cfg *tls.Config) Option     { return nil }
func WithCallTimeout(d time.Duration) Option   { return nil }
func New(c any, opts ...Option) (*Store, error) { return nil, nil }
func Dial(ctx context.Context, addr string, opts ...Option) (*Store, error) { return nil, nil }
func DialCluster(ctx context.Context, addr string, opts ...Option) (*Store, error) { return nil, nil }
func Open(path string, opts ...Option) (*Store, error) { return nil, nil }
`
	bad := `package bad

import (
	"context"
	"crypto/tls"
	"time"
)

const (
	ConnectTimeout     = 2 * time.Second
	DefaultDialTimeout = 5 * time.Second
)

type Store struct{}

type options struct{}

type Option func(*options)

func Clock(now func() time.Time) Option      { return nil }
func WithNow(now func() time.Time) Option    { return nil }
func Connect(ctx context.Context, addr string) (*Store, error) { return nil, nil }
func Dial(ctx context.Context, addr string, cfg *tls.Config) (*Store, error) { return nil, nil }
`
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"good", good, nil},
		{"bad", bad, []string{
			"bad: Store has no Close method",
			"bad: Store has no String method: name the deployment it reaches, without credentials",
			"bad: constructor Connect: name it New (over a client the caller made), Dial… (the Store makes and owns the client) or Open (a local file)",
			"bad: constructor Dial takes a *tls.Config: make TLS an option, WithTLSConfig",
			"bad: no ErrClosed: export the error a call to a closed Store matches",
			"bad: exports both ConnectTimeout and DefaultDialTimeout: export one dial timeout",
			"bad: option Clock: name it With…",
			"bad: option Clock takes a clock: name it WithClock",
			"bad: option WithNow takes a clock: name it WithClock",
		}},
	} {
		dir := filepath.Join(t.TempDir(), tc.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, tc.name+".go"), []byte(tc.src), 0o644); err != nil {
			t.Fatal(err)
		}
		got := backendRules(t, dir)
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("control %s: found\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}
