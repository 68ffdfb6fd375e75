package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const fixture = `package p

func F(xs []int, ok bool) (int, error) {
	if len(xs) == 0 && !ok {
		return 0, errEmpty
	}
	log("f")
	n := 1
	for i := range xs {
		if xs[i] >= n || i < 2 {
			n += xs[i]
		}
	}
	return n, nil
}

var limit = 3
`

// TestMutants: every kind of mutant on a small fixture, in source order,
// with its key and the source it makes.
func TestMutants(t *testing.T) {
	ms, err := Mutants("p/f.go", []byte(fixture))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Key())
	}
	want := []string{
		"p/f.go | F | negate-if | len(xs) == 0 && !ok => !(len(xs) == 0 && !ok)",
		"p/f.go | F | cmp | len(xs) == 0 => len(xs) != 0",
		"p/f.go | F | const | len(xs) == 0 => len(xs) == 1",
		"p/f.go | F | logic | len(xs) == 0 && !ok => len(xs) == 0 || !ok",
		"p/f.go | F | drop-return | return 0, errEmpty => (removed)",
		"p/f.go | F | const | return 0, errEmpty => return 1, errEmpty",
		`p/f.go | F | drop-call | log("f") => (removed)`,
		"p/f.go | F | const | n := 1 => n := 0",
		"p/f.go | F | negate-if | xs[i] >= n || i < 2 => !(xs[i] >= n || i < 2)",
		"p/f.go | F | cmp | xs[i] >= n => xs[i] > n",
		"p/f.go | F | logic | xs[i] >= n || i < 2 => xs[i] >= n && i < 2",
		"p/f.go | F | cmp | i < 2 => i <= 2",
		"p/f.go | F | const | i < 2 => i < 3",
		"p/f.go | var limit | const | 3 => 4",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("keys:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Applying a mutant changes only its bytes.
	m := ms[slices.IndexFunc(ms, func(m Mutant) bool { return m.Kind == KindLogic })]
	if src := string(m.Apply([]byte(fixture))); src != strings.Replace(fixture, "== 0 && !ok", "== 0 || !ok", 1) {
		t.Fatalf("Apply(%s):\n%s", m.Key(), src)
	}
	if d := diff([]byte(fixture), &m); d != "-\tif len(xs) == 0 && !ok {\n+\tif len(xs) == 0 || !ok {\n" {
		t.Fatalf("diff:\n%s", d)
	}
	r := ms[slices.IndexFunc(ms, func(m Mutant) bool { return m.Kind == KindDropReturn })]
	if d := diff([]byte(fixture), &r); d != "-\t\treturn 0, errEmpty\n" {
		t.Fatalf("diff of a removal:\n%q", d)
	}
	if m.Pos.Line != 4 || m.Func != "F" {
		t.Fatalf("position %v in %q, want line 4 in F", m.Pos, m.Func)
	}
}

// TestKeysIgnorePosition: lines added above a function, or code moved,
// leave its mutants' keys unchanged; the same change twice in a function
// gets two keys.
func TestKeysIgnorePosition(t *testing.T) {
	keys := func(src string) []string {
		ms, err := Mutants("f.go", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, m := range ms {
			ks = append(ks, m.Key())
		}
		return ks
	}
	a := keys("package p\n\nfunc (s *S) M(a, b int) bool { return a < b || a < b }\n")
	b := keys("package p\n\n// M compares.\n\n\nfunc (s *S) M(a, b int) bool {\n\treturn a < b ||\n\t\ta < b\n}\n")
	if !slices.Equal(a, b) {
		t.Fatalf("keys moved with the code:\n%q\n%q", a, b)
	}
	if !slices.Contains(a, "f.go | (*S).M | cmp | a < b => a <= b | #2") {
		t.Fatalf("the second identical change has no #2 key: %q", a)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-pkg", ""}, {"-p", "0"}, {"-sample", "-1"}, {"-timeout", "0s"}, {"-kinds", "cmp,bogus"}, {"-files", "("}, {"-match", "["}, {"-run", "("}, {"extra"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	c, err := parseFlags([]string{"-kinds", "cmp,logic", "-pkg", "a/b, ./c/", "-run", "Mirror"})
	if err != nil || !c.kinds[KindCmp] || c.kinds[KindConst] || !slices.Equal(c.pkgs, []string{"a/b", "c"}) || c.run != "Mirror" {
		t.Fatalf("parseFlags = %+v, %v", c, err)
	}
}

// TestRunFixture runs the tool on testdata/fixmod, a module whose tests
// kill some mutants and not others: the counts, the survivors with their
// diffs, the known equivalent shown apart and left out of the rate, a
// mutant that does not compile counted as unviable, and the fixture's
// source unchanged.
func TestRunFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test once per mutant")
	}
	t.Setenv("GOWORK", "off")
	root := filepath.Join("testdata", "fixmod")
	before := hashTree(t, root)
	var out bytes.Buffer
	err := run(context.Background(), []string{"-root", root, "-pkg", ".", "-equivalent", "equivalent.txt", "-q", "-p", "2", "-min", "90"}, &out)
	if err == nil || !strings.Contains(err.Error(), "below -min 90.0%") {
		t.Errorf("run with -min 90 = %v, want the rate reported below it", err)
	}
	got := out.String()
	t.Log(got)
	for _, want := range []string{
		"fix.go       13       6         5           1         1      54.5%",
		"survivors (5):\nfix.go:11:7: cmp in Clamp\n    key: fix.go | Clamp | cmp | v < 0 => v <= 0\n    -\tif v < 0 {\n    +\tif v <= 0 {\n",
		"known equivalent, not counted (1, listed in equivalent.txt):\nfix.go:14:7: cmp in Clamp\n    key: fix.go | Clamp | cmp | v > hi => v >= hi\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(got, "a[2] => a[3]") {
		t.Error("the mutant that does not compile is listed as a survivor")
	}
	if after := hashTree(t, root); after != before {
		t.Error("the fixture's files changed")
	}
}

func hashTree(t *testing.T, dir string) [32]byte {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		h.Write([]byte(p))
		h.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}
