package main

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// TestRegistryMatchesBenchRows: the benchmarks' round-trip rows
// (bench/main_test.go's backends) name the backends of the registry, no
// more and no fewer, so a store the command gains gets its row.
func TestRegistryMatchesBenchRows(t *testing.T) {
	b, err := os.ReadFile("../../bench/main_test.go")
	if err != nil {
		t.Fatalf("%v (the test runs in the repository)", err)
	}
	m := regexp.MustCompile(`(?m)^var backends = \[\]string\{(.*)\}$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("bench/main_test.go has no line `var backends = []string{...}`: update this test")
	}
	var rows []string
	for _, q := range regexp.MustCompile(`"[^"]*"`).FindAll(m[1], -1) {
		s, err := strconv.Unquote(string(q))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, s)
	}
	var names []string
	for _, d := range registry {
		names = append(names, d.name)
	}
	slices.Sort(rows)
	slices.Sort(names)
	if !slices.Equal(rows, names) {
		t.Errorf("bench's round-trip rows are %v, the registry %v", rows, names)
	}
}
