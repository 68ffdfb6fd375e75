package conformance

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// TestReliedOnNames: the Go name each relied-on promise's Waive suggestion
// prints is the constant that holds that promise, so the call the report
// suggests compiles and waives what it says.
func TestReliedOnNames(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "ids.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]PromiseID{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						v, _ := strconv.Unquote(lit.Value)
						consts[n.Name] = PromiseID(v)
					}
				}
			}
		}
	}
	for p, r := range reliedOn {
		if got, ok := consts[r.name]; !ok || got != p {
			t.Errorf("reliedOn[%q] is named %s, which holds %q", string(p), r.name, string(got))
		}
		if r.meaning == "" || promiseText[p] == "" {
			t.Errorf("%s: no meaning or no text", r.name)
		}
	}
}
