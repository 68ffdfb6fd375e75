package kvbreaker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// TestReadmeCodeCompiles: every ```go block of README.md and docs/*.md, and
// every constructor of the README's Backends table, compiles and passes go vet
// in a throwaway module of a temporary workspace that holds the root module
// and only the modules the code names (one backend's, as a user who ran go get
// for it has). A snippet that is not a whole file is a function body; the
// names it takes as given (ctx, queue, post, the SDK clients of the Backends
// table, …) are declared by readmePackages. Errors point at the Markdown line.
// The table has one constructor per backend of backends/, and each one runs:
// with clients of servers that are not there, its only error may be
// driver.ErrUnreachable (so a Redis client without ContextTimeoutEnabled, which
// redis.New refuses, fails the test).
func TestReadmeCodeCompiles(t *testing.T) {
	if _, err := os.Stat("go.work"); err != nil {
		t.Skipf("not in the repository's workspace (%v): the backend modules are not here", err)
	}
	units := readmeUnits(t)
	checkBackendsTable(t, units)

	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]readmeUnit{}
	for _, u := range units {
		checkPrefixes(t, u.source(root, u.modules()))
		key := strings.Join(u.modules(), "+")
		groups[key] = append(groups[key], u)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		name := key
		if name == "" {
			name = "root"
		}
		t.Run(name, func(t *testing.T) {
			var mods []string
			if key != "" {
				mods = strings.Split(key, "+")
			}
			vetReadmeUnits(t, mods, groups[key])
		})
	}
}

// readmeUnit is one piece of Go code of the Markdown files.
type readmeUnit struct {
	file string // relative to the repository root
	line int    // the Markdown line of its first line
	code string
	cell bool // a constructor of the Backends table
}

// readmePackage is a package a snippet may use under the name it is keyed by,
// with what it needs: the module that provides it (empty: the root module),
// the imports of the prelude and the names the snippets take as given.
type readmePackage struct {
	module  string
	imports []string
	prelude string
}

// readmePackages: the root module's packages, then one entry per module a
// snippet can name. The names of the SDKs' packages are the ones the docs
// state (goredis, awsdynamodb, awsconfig).
var readmePackages = map[string]readmePackage{
	"": {
		imports: []string{`"context"`, `"crypto/tls"`, `"errors"`, `"fmt"`, `"log"`, `"log/slog"`, `"net/http"`, `"os"`, `"time"`,
			`"github.com/kvbreaker/kvbreaker"`, `"github.com/kvbreaker/kvbreaker/backends/memory"`,
			`"github.com/kvbreaker/kvbreaker/driver"`, `"github.com/kvbreaker/kvbreaker/httpbreaker"`},
		prelude: `
var (
	_ = context.Background
	_ = errors.New
	_ = fmt.Println
	_ = log.Fatal
	_ = slog.Default
	_ = http.DefaultClient
	_ = os.Getenv
	_ = kvbreaker.New
	_ = memory.New
	_ = driver.ErrNotFound
	_ httpbreaker.Transport
)

// message is a queued delivery; post sends it.
type message struct {
	URL       string
	HeldSince time.Time
}

func post(ctx context.Context, m message) error { return nil }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var (
	ctx       = context.Background()
	queue     []message
	m         message
	breaker   *kvbreaker.Breaker
	tlsConfig *tls.Config
)
`,
	},
	"etcd": {
		module:  "backends/etcd",
		imports: []string{`"github.com/kvbreaker/kvbreaker/backends/etcd"`, `clientv3 "go.etcd.io/etcd/client/v3"`},
		prelude: `
var _ = etcd.New
var etcdClient = must(clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}})) // nothing listens
`,
	},
	"dynamodb": {
		module: "backends/dynamodb",
		imports: []string{`"github.com/kvbreaker/kvbreaker/backends/dynamodb"`,
			`awsconfig "github.com/aws/aws-sdk-go-v2/config"`, `awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"`},
		prelude: `
var _ = dynamodb.New
var _ = awsconfig.LoadDefaultConfig
var dynamoClient = awsdynamodb.New(awsdynamodb.Options{Region: "us-east-1"})
`,
	},
	"cloudflarekv": {
		module: "backends/cloudflarekv",
		imports: []string{`"github.com/kvbreaker/kvbreaker/backends/cloudflarekv"`,
			`"github.com/cloudflare/cloudflare-go/v6"`, `"github.com/cloudflare/cloudflare-go/v6/option"`},
		prelude: `
var _ = cloudflarekv.New
var _ = option.WithAPIToken
var (
	cf                     = cloudflare.NewClient(option.WithAPIToken("readme-token"))
	accountID, namespaceID = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
)
`,
	},
	"redis": {
		module:  "backends/redis",
		imports: []string{`"github.com/kvbreaker/kvbreaker/backends/redis"`, `goredis "github.com/redis/go-redis/v9"`},
		prelude: `
var _ = redis.New
var _ = goredis.NewClient
`,
	},
	"postgres": {
		module:  "backends/postgres",
		imports: []string{`"github.com/kvbreaker/kvbreaker/backends/postgres"`, `"github.com/jackc/pgx/v5/pgxpool"`},
		prelude: `
var _ = postgres.New
var pool = must(pgxpool.New(context.Background(), "postgres://readme@127.0.0.1:1/readme")) // connects lazily
`,
	},
	"mysql": {
		module: "backends/mysql",
		imports: []string{`"github.com/kvbreaker/kvbreaker/backends/mysql"`, `"database/sql"`,
			`_ "github.com/go-sql-driver/mysql"`},
		prelude: `
var _ = mysql.New
var db = must(sql.Open("mysql", "readme@tcp(127.0.0.1:1)/readme")) // connects lazily
`,
	},
	"sqlite": {
		module:  "backends/sqlite",
		imports: []string{`"github.com/kvbreaker/kvbreaker/backends/sqlite"`},
		prelude: `
var _ = sqlite.Open
`,
	},
	"nats": {
		module:  "backends/nats",
		imports: []string{`"github.com/kvbreaker/kvbreaker/backends/nats"`, `natsgo "github.com/nats-io/nats.go"`},
		prelude: `
var _ = nats.New
// Nothing listens: the connection keeps trying, and nats.New waits for it
// until its setup timeout.
var natsConn = must(natsgo.Connect("nats://127.0.0.1:1", natsgo.RetryOnFailedConnect(true)))
`,
	},
	"otelkvbreaker": {
		module:  "otelkvbreaker",
		imports: []string{`"github.com/kvbreaker/kvbreaker/otelkvbreaker"`},
		prelude: `
var _ = otelkvbreaker.New
`,
	},
}

// readmeUnits returns the Go code of README.md and docs/*.md: every ```go
// block, and every constructor of the README's Backends table.
func readmeUnits(t *testing.T) []readmeUnit {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	var units []readmeUnit
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		units = append(units, goBlocks(f, string(b))...)
		if f == "README.md" {
			cells, err := constructorCells(f, string(b))
			if err != nil {
				t.Fatal(err)
			}
			units = append(units, cells...)
		}
	}
	return units
}

// checkedElsewhere, on the line before a ```go fence, leaves the block to
// the test it names: code of package main in cmd/kvbreaker, which no unit
// here can import (docs/backends.md's example descriptor, which
// TestExampleDescriptorRuns compares with its own declaration and runs).
const checkedElsewhere = "<!-- compiled by "

// goBlocks returns the fenced ```go blocks of a Markdown text, each without
// the fence's indentation, except those checkedElsewhere.
func goBlocks(file, text string) []readmeUnit {
	var out []readmeUnit
	var cur *readmeUnit
	var indent string
	var b strings.Builder
	prev := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		skip := strings.HasPrefix(prev, checkedElsewhere)
		prev = trimmed
		switch {
		case cur == nil && skip:
		case cur == nil && strings.HasPrefix(trimmed, "```") && strings.TrimSpace(strings.TrimPrefix(trimmed, "```")) == "go":
			cur = &readmeUnit{file: file, line: i + 2}
			indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			b.Reset()
		case cur != nil && trimmed == "```":
			cur.code = b.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			b.WriteString(strings.TrimPrefix(line, indent))
			b.WriteByte('\n')
		}
	}
	return out
}

// constructorCells returns the code of the "constructor" column of the
// README's Backends table, one unit per row.
func constructorCells(file, text string) ([]readmeUnit, error) {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		header := tableCells(line)
		col := slices.Index(header, "constructor")
		if col < 0 {
			continue
		}
		var out []readmeUnit
		for j := i + 2; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			cells := tableCells(lines[j])
			if col >= len(cells) {
				return nil, fmt.Errorf("%s:%d: the row has no constructor column", file, j+1)
			}
			code := cells[col]
			if strings.Count(code, "`") != 2 || !strings.HasPrefix(code, "`") || !strings.HasSuffix(code, "`") {
				return nil, fmt.Errorf("%s:%d: the constructor cell is not one `code` span: %s", file, j+1, code)
			}
			out = append(out, readmeUnit{file: file, line: j + 1, code: strings.Trim(code, "`") + "\n", cell: true})
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: no table with a \"constructor\" column (the Backends table)", file)
}

// tableCells splits a Markdown table row into its trimmed cells.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
		return nil
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// checkBackendsTable: the Backends table has one constructor per backend of
// the repository (backends/*), each naming that backend's package.
func checkBackendsTable(t *testing.T, units []readmeUnit) {
	t.Helper()
	dirs, err := os.ReadDir("backends")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]int{}
	for _, u := range units {
		if !u.cell {
			continue
		}
		for _, p := range u.packageNames() {
			named[p]++
		}
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		if n := named[d.Name()]; n != 1 {
			t.Errorf("README.md's Backends table has %d constructors using package %s, want 1 (every backend of backends/ once)", n, d.Name())
		}
	}
}

// isWholeFile reports whether the unit is a Go file rather than a function body.
func (u readmeUnit) isWholeFile() bool {
	for line := range strings.Lines(u.code) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "//") {
			continue
		}
		return strings.HasPrefix(trimmed, "package ")
	}
	return false
}

// packageNames returns the identifiers of readmePackages (and "memory") the
// code uses as a package: X in X.Sel, or, for a whole file, its imports of
// this repository.
func (u readmeUnit) packageNames() []string {
	seen := map[string]bool{}
	if u.isWholeFile() {
		f, err := parser.ParseFile(token.NewFileSet(), u.file, u.code, parser.ImportsOnly)
		if err == nil {
			for _, imp := range f.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if rest, ok := strings.CutPrefix(path, "github.com/kvbreaker/kvbreaker/"); ok {
					seen[filepath.Base(rest)] = true
				}
			}
		}
	} else {
		var s scanner.Scanner
		fset := token.NewFileSet()
		s.Init(fset.AddFile(u.file, -1, len(u.code)), []byte(u.code), nil, 0)
		prev := ""
		for {
			_, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok == token.PERIOD && prev != "" {
				if _, ok := readmePackages[prev]; ok || prev == "memory" {
					seen[prev] = true
				}
			}
			prev = ""
			if tok == token.IDENT {
				prev = lit
			}
		}
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// modules returns the readmePackages keys (other than the root's) the unit
// needs, sorted. A whole file importing a package of another module fails in
// go vet, saying which.
func (u readmeUnit) modules() []string {
	var out []string
	for _, p := range u.packageNames() {
		if rp, ok := readmePackages[p]; ok && rp.module != "" {
			out = append(out, p)
		}
	}
	return out
}

// source returns the unit as a Go file of package main, starting with a
// //line directive so that errors name the Markdown line.
func (u readmeUnit) source(root string, mods []string) string {
	directive := fmt.Sprintf("//line %s:%d\n", filepath.Join(root, u.file), u.line)
	if u.isWholeFile() {
		return directive + u.code
	}
	var imports []string
	var preludes []string
	for _, k := range append([]string{""}, mods...) {
		imports = append(imports, readmePackages[k].imports...)
		preludes = append(preludes, readmePackages[k].prelude)
	}
	head := "package main\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n" + strings.Join(preludes, "") + "\nfunc main() {\n"
	body := directive + u.code
	// The snippet's own variables may be meant for code that follows it in
	// a program: use them, so that "declared and not used" does not fail it.
	var uses strings.Builder
	if f, err := parser.ParseFile(token.NewFileSet(), "", head+body+"}\n", 0); err == nil {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "main" {
				continue
			}
			for _, st := range fn.Body.List {
				for _, name := range declaredNames(st) {
					fmt.Fprintf(&uses, "\t_ = %s\n", name)
					if name == "err" && u.cell {
						// Run, a constructor must accept its arguments:
						// only the missing server may fail it.
						uses.WriteString("\tif err != nil && !errors.Is(err, driver.ErrUnreachable) {\n\t\tfmt.Fprintln(os.Stderr, err)\n\t\tos.Exit(1)\n\t}\n")
					}
				}
			}
		}
	}
	return head + body + uses.String() + "}\n"
}

// checkPrefixes: every prefix the code passes to kvbreaker.Prefixed as a
// literal is one Prefixed accepts (it ends in '/'), which compiling cannot
// tell.
func checkPrefixes(t *testing.T, src string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, 0)
	if err != nil {
		return // go vet reports it
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 2 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Prefixed" {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "kvbreaker" {
			return true
		}
		lit, ok := call.Args[1].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		prefix, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		if _, err := kvbreaker.Prefixed(memory.New(), prefix); err != nil {
			t.Errorf("%s: %v", fset.Position(lit.Pos()), err)
		}
		return true
	})
}

// declaredNames returns the variables a statement declares in its block.
func declaredNames(st ast.Stmt) []string {
	var out []string
	switch st := st.(type) {
	case *ast.AssignStmt:
		if st.Tok == token.DEFINE {
			for _, e := range st.Lhs {
				if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
					out = append(out, id.Name)
				}
			}
		}
	case *ast.DeclStmt:
		if gd, ok := st.Decl.(*ast.GenDecl); ok && gd.Tok == token.VAR {
			for _, spec := range gd.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if id.Name != "_" {
						out = append(out, id.Name)
					}
				}
			}
		}
	}
	return out
}

// vetReadmeUnits writes the units into one throwaway module, each a main
// package of its own, in a workspace of the root module and mods' modules,
// runs go vet on them, then runs each constructor of the Backends table.
func vetReadmeUnits(t *testing.T, mods []string, units []readmeUnit) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	work, err := readWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	use := []string{".", root}
	for _, m := range mods {
		use = append(use, filepath.Join(root, filepath.FromSlash(readmePackages[m].module)))
	}
	goWork := "go " + work.Go + "\n\nuse (\n\t" + strings.Join(use, "\n\t") + "\n)\n"
	// The repository's replaces too: its modules require each other at a
	// version that the workspace, not a proxy, provides.
	for _, r := range work.Replace {
		goWork += fmt.Sprintf("\nreplace %s %s => %s %s\n", r.Old.Path, r.Old.Version, r.New.Path, r.New.Version)
	}
	files := map[string]string{
		"go.mod":  "module example.com/readme\n\ngo " + work.Go + "\n",
		"go.work": goWork,
	}
	for i, u := range units {
		files[fmt.Sprintf("u%02d/main.go", i)] = u.source(root, mods)
	}
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS="+workspaceGOFLAGS(), "GOTOOLCHAIN=local")
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = dir
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		var where []string
		for _, u := range units {
			where = append(where, fmt.Sprintf("%s:%d", u.file, u.line))
		}
		t.Fatalf("go vet of the README code using %v (%s) failed: %v\n%s", append([]string{"kvbreaker"}, mods...), strings.Join(where, ", "), err, out)
	}
	for i, u := range units {
		if !u.cell {
			continue
		}
		// Built first, without a bound of its own: on a loaded machine the
		// build alone took over the 2 minutes that bound the run (go run
		// was killed while compiling).
		bin := filepath.Join(dir, fmt.Sprintf("u%02d.bin", i))
		build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, fmt.Sprintf("./u%02d", i))
		build.Dir, build.Env = dir, env
		if out, err := build.CombinedOutput(); err != nil {
			t.Errorf("%s:%d: go build: %v\n%s", u.file, u.line, err, out)
			continue
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin)
		cmd.Dir = dir
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s:%d: the constructor, run with clients of servers that are not there, failed with more than driver.ErrUnreachable: %v\n%s", u.file, u.line, err, out)
		}
	}
}

// goWork is what `go work edit -json` shows of a go.work.
type goWork struct {
	Go      string
	Replace []struct {
		Old, New struct{ Path, Version string }
	}
}

// readWorkspace returns the repository's go.work, with its replacements'
// directories made absolute.
func readWorkspace(root string) (goWork, error) {
	cmd := exec.Command("go", "work", "edit", "-json", filepath.Join(root, "go.work"))
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		return goWork{}, fmt.Errorf("go work edit -json: %w", err)
	}
	var w goWork
	if err := json.Unmarshal(out, &w); err != nil {
		return goWork{}, fmt.Errorf("go work edit -json: %w", err)
	}
	for i, r := range w.Replace {
		if r.New.Version == "" && !filepath.IsAbs(r.New.Path) {
			w.Replace[i].New.Path = filepath.Join(root, filepath.FromSlash(r.New.Path))
		}
	}
	return w, nil
}

// workspaceGOFLAGS returns $GOFLAGS without -mod, which workspace mode refuses
// (other than readonly).
func workspaceGOFLAGS() string {
	var keep []string
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if !strings.HasPrefix(f, "-mod=") && !strings.HasPrefix(f, "--mod=") {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}
