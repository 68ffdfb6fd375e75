package serve

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// opTypes are the Go types of each operation's request and 200 body.
var opTypes = map[string]struct{ req, resp any }{
	"POST /v1/decide":            {DecideRequest{}, DecideResponse{}},
	"POST /v1/outcomes":          {OutcomesRequest{}, OutcomesResponse{}},
	"POST /v1/abandon":           {AbandonRequest{}, AbandonResponse{}},
	"GET /v1/circuits":           {nil, CircuitsResponse{}},
	"GET /v1/circuits/{host}":    {nil, Circuit{}},
	"DELETE /v1/circuits/{host}": {nil, ResetResponse{}},
	"GET /openapi.json":          {nil, nil},
	"GET /v1/status":             {nil, StatusResponse{}},
	"GET /metrics":               {nil, nil},
	"GET /":                      {nil, nil},
	"GET /page.css":              {nil, nil},
	"GET /page.js":               {nil, nil},
	"GET /favicon.svg":           {nil, nil},
	"GET /healthz":               {nil, map[string]string{}},
}

type schema struct {
	Ref        string             `json:"$ref"`
	Type       any                `json:"type"`
	Properties map[string]*schema `json:"properties"`
	Items      *schema            `json:"items"`
	OneOf      []*schema          `json:"oneOf"`
}

type operation struct {
	Permission  string `json:"x-permission"`
	RequestBody *struct {
		Content map[string]struct{ Schema *schema } `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Content map[string]struct{ Schema *schema } `json:"content"`
	} `json:"responses"`
}

type document struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]*schema `json:"schemas"`
	} `json:"components"`
}

// TestOpenAPIMatchesHandlers: the document served at /openapi.json names
// every route of the handler with its methods and permission, and no
// other; every request and response body's properties are the JSON fields
// of the Go type the handler decodes or encodes, at every depth; and what
// the document says of a route holds of the running handler (an
// unlisted method is refused).
func TestOpenAPIMatchesHandlers(t *testing.T) {
	f := newFixture(t)
	code, ctype, body := f.do("GET", "/openapi.json", "", "")
	if code != 200 || ctype != "application/json" {
		t.Fatalf("GET /openapi.json: %d %s", code, ctype)
	}
	var doc document
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]operation{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op operation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			documented[strings.ToUpper(method)+" "+path] = op
		}
	}
	served := map[string]route{}
	for _, r := range routes {
		served[r.method+" "+strings.TrimSuffix(r.pattern, "{$}")] = r
	}
	if d, s := slices.Sorted(maps.Keys(documented)), slices.Sorted(maps.Keys(served)); !slices.Equal(d, s) {
		t.Fatalf("documented operations %v, served %v", d, s)
	}
	if len(opTypes) != len(served) {
		t.Fatalf("opTypes has %d operations, the handler %d: give each its types", len(opTypes), len(served))
	}
	for key, op := range documented {
		r := served[key]
		if op.Permission != r.perm.String() {
			t.Errorf("%s: documented permission %q, handler %q", key, op.Permission, r.perm)
		}
		types, ok := opTypes[key]
		if !ok {
			t.Errorf("%s: no Go types in opTypes", key)
			continue
		}
		if types.req != nil {
			if op.RequestBody == nil {
				t.Errorf("%s: no requestBody documented", key)
			} else {
				compare(t, &doc, key+" request", op.RequestBody.Content["application/json"].Schema, reflect.TypeOf(types.req))
			}
		} else if op.RequestBody != nil {
			t.Errorf("%s: a requestBody is documented, the handler reads none", key)
		}
		ok200 := op.Responses["200"].Content["application/json"].Schema
		if types.resp != nil {
			compare(t, &doc, key+" response", ok200, reflect.TypeOf(types.resp))
		}
		for status, resp := range op.Responses {
			if status != "200" && resp.Content == nil {
				// A $ref to the Problem response: checked below.
				continue
			}
		}
		// A method the document does not list is refused by the handler.
		path := strings.ReplaceAll(strings.SplitN(key, " ", 2)[1], "{host}", "x.example")
		if code, _, _ := f.do("PATCH", path, tokOperator, ""); code != http.StatusMethodNotAllowed {
			t.Errorf("PATCH %s: %d, want 405", path, code)
		}
	}
	compare(t, &doc, "Problem", doc.Components.Schemas["Problem"], reflect.TypeOf(problem{}))
}

// compare checks that s (resolving $ref) has exactly the JSON fields of t,
// recursively.
func compare(t *testing.T, doc *document, where string, s *schema, typ reflect.Type) {
	t.Helper()
	if s == nil {
		t.Errorf("%s: no schema", where)
		return
	}
	for _, alt := range s.OneOf {
		if alt.Ref != "" {
			s = alt
		}
	}
	if s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		s = doc.Components.Schemas[name]
		if s == nil {
			t.Errorf("%s: $ref to a missing schema %s", where, name)
			return
		}
		where += " (" + name + ")"
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == reflect.TypeFor[time.Time]():
		return
	case typ.Kind() == reflect.Slice:
		if s.Items == nil {
			t.Errorf("%s: an array in Go, no items in the document", where)
			return
		}
		compare(t, doc, where+"[]", s.Items, typ.Elem())
		return
	case typ.Kind() == reflect.Map:
		if s.Properties == nil {
			t.Errorf("%s: an object in Go, no properties documented", where)
		}
		return
	case typ.Kind() != reflect.Struct:
		return
	}
	fields := map[string]reflect.Type{}
	for i := range typ.NumField() {
		sf := typ.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fields[name] = sf.Type
	}
	if g, d := slices.Sorted(maps.Keys(fields)), slices.Sorted(maps.Keys(s.Properties)); !slices.Equal(g, d) {
		t.Errorf("%s: Go fields %v, documented properties %v", where, g, d)
		return
	}
	for name, ft := range fields {
		compare(t, doc, where+"."+name, s.Properties[name], ft)
	}
}
