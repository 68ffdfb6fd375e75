package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
)

// Kinds of single-point mutant.
const (
	KindCmp        = "cmp"         // < ↔ <=, > ↔ >=, == ↔ !=
	KindLogic      = "logic"       // && ↔ ||
	KindConst      = "const"       // integer literal 0 → 1, 1 → 0, n → n+1
	KindNegateIf   = "negate-if"   // if c → if !(c)
	KindDropReturn = "drop-return" // a return inside an if's block removed
	KindDropCall   = "drop-call"   // a call statement whose result is discarded removed
)

// Mutant is one single-point change to one file: the bytes [Start, End) of
// the file replaced by Repl.
type Mutant struct {
	File       string         // as given to Mutants (relative to the root)
	Pos        token.Position // where the change is
	Func       string         // the enclosing function ("(*T).M", "F", or "var x")
	Kind       string
	Start, End int
	Repl       string
	// Before and After describe the change by the source of the smallest
	// node around it, on one line: they and the function name, not the
	// position, identify a mutant in the equivalents file.
	Before, After string
	// Nth counts mutants with the same description in the same function
	// before this one (0 for the first), so that identical code twice in
	// one function gives two keys.
	Nth int
}

// Key identifies m independently of its position: file, function, kind,
// and the change, as the equivalents file lists it.
func (m *Mutant) Key() string {
	k := fmt.Sprintf("%s | %s | %s | %s => %s", m.File, m.Func, m.Kind, m.Before, m.After)
	if m.Nth > 0 {
		k += fmt.Sprintf(" | #%d", m.Nth+1)
	}
	return k
}

// Apply returns src with m's change made.
func (m *Mutant) Apply(src []byte) []byte {
	out := make([]byte, 0, len(src)+len(m.Repl))
	out = append(out, src[:m.Start]...)
	out = append(out, m.Repl...)
	return append(out, src[m.End:]...)
}

var flips = map[token.Token]token.Token{
	token.LSS: token.LEQ, token.LEQ: token.LSS,
	token.GTR: token.GEQ, token.GEQ: token.GTR,
	token.EQL: token.NEQ, token.NEQ: token.EQL,
	token.LAND: token.LOR, token.LOR: token.LAND,
}

// Mutants parses src (the file name, for positions and keys) and returns
// every single-point mutant of it, in source order. Code in a function's
// body and in package-level var initialisers is mutated; constant
// declarations are not (a changed constant is usually a changed setting,
// not a changed decision, and most would not compile).
func Mutants(name string, src []byte) ([]Mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	c := &collector{fset: fset, src: src, name: name, seen: map[string]int{}}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Body != nil {
				c.fn = funcName(d)
				c.walk(d.Body)
			}
		case *ast.GenDecl:
			if d.Tok != token.VAR {
				continue
			}
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				c.fn = "var " + vs.Names[0].Name
				for _, v := range vs.Values {
					c.walk(v)
				}
			}
		}
	}
	slices.SortStableFunc(c.out, func(a, b Mutant) int { return a.Start - b.Start })
	return c.out, nil
}

func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	id, _ := t.(*ast.Ident)
	name := "?"
	if id != nil {
		name = id.Name
	}
	if star != "" {
		return fmt.Sprintf("(*%s).%s", name, d.Name.Name)
	}
	return fmt.Sprintf("%s.%s", name, d.Name.Name)
}

type collector struct {
	fset *token.FileSet
	src  []byte
	name string
	fn   string
	seen map[string]int
	out  []Mutant
}

func (c *collector) off(p token.Pos) int { return c.fset.Position(p).Offset }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 100 {
		s = s[:97] + "..."
	}
	return s
}

// add records the mutant replacing [start, end) by repl, described by
// context (a node around it, whose text before and after the change
// identifies it).
func (c *collector) add(kind string, at token.Pos, start, end int, repl string, context ast.Node) {
	cs, ce := c.off(context.Pos()), c.off(context.End())
	before := string(c.src[cs:ce])
	after := before[:start-cs] + repl + before[end-cs:]
	m := Mutant{
		File: c.name, Pos: c.fset.Position(at), Func: c.fn, Kind: kind,
		Start: start, End: end, Repl: repl,
		Before: oneLine(before), After: oneLine(after),
	}
	if m.After == "" {
		m.After = "(removed)"
	}
	k := m.Key()
	m.Nth = c.seen[k]
	c.seen[k]++
	c.out = append(c.out, m)
}

func (c *collector) walk(root ast.Node) {
	var stack []ast.Node
	ast.Inspect(root, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		var parent ast.Node
		if len(stack) > 0 {
			parent = stack[len(stack)-1]
		}
		stack = append(stack, n)
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if to, ok := flips[n.Op]; ok {
				kind := KindCmp
				if n.Op == token.LAND || n.Op == token.LOR {
					kind = KindLogic
				}
				s := c.off(n.OpPos)
				c.add(kind, n.OpPos, s, s+len(n.Op.String()), to.String(), n)
			}
		case *ast.BasicLit:
			if n.Kind != token.INT {
				break
			}
			v, err := strconv.ParseInt(n.Value, 0, 64)
			if err != nil || v == 1<<63-1 {
				break
			}
			repl := strconv.FormatInt(v+1, 10)
			switch v {
			case 0:
				repl = "1"
			case 1:
				repl = "0"
			}
			c.add(KindConst, n.Pos(), c.off(n.Pos()), c.off(n.End()), repl, c.around(n, parent))
		case *ast.IfStmt:
			s, e := c.off(n.Cond.Pos()), c.off(n.Cond.End())
			c.add(KindNegateIf, n.Cond.Pos(), s, e, "!("+string(c.src[s:e])+")", n.Cond)
			c.returns(n.Body)
			if b, ok := n.Else.(*ast.BlockStmt); ok {
				c.returns(b)
			}
		case *ast.ExprStmt:
			if _, ok := ast.Unparen(n.X).(*ast.CallExpr); ok {
				c.add(KindDropCall, n.Pos(), c.off(n.Pos()), c.off(n.End()), "", n)
			}
		}
		return true
	})
}

// around is the node that describes a change to n: its parent when that
// is an expression or a statement on one line (v < 0, return 0, n := 1),
// else n.
func (c *collector) around(n, parent ast.Node) ast.Node {
	switch parent.(type) {
	case ast.Expr:
		return parent
	case *ast.ReturnStmt, *ast.AssignStmt, *ast.IncDecStmt, *ast.ExprStmt, *ast.SendStmt, *ast.ValueSpec:
		if c.fset.Position(parent.Pos()).Line == c.fset.Position(parent.End()).Line {
			return parent
		}
	}
	return n
}

// returns adds the removal of each return statement directly in b (an if's
// block): the early returns.
func (c *collector) returns(b *ast.BlockStmt) {
	for _, s := range b.List {
		if r, ok := s.(*ast.ReturnStmt); ok {
			c.add(KindDropReturn, r.Pos(), c.off(r.Pos()), c.off(r.End()), "", r)
		}
	}
}
