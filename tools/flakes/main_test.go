package main

import (
	"strings"
	"testing"
)

// A go test -json stream: a subtest failed (its parent fails with it), a
// test that logged a seed failed, a package failed outside any test, and
// a test passed.
const stream = `{"Action":"run","Package":"github.com/kvbreaker/kvbreaker/conformance","Test":"TestA"}
{"Action":"output","Package":"github.com/kvbreaker/kvbreaker/conformance","Test":"TestA/sub_1","Output":"    a_test.go:9: boom\n"}
{"Action":"fail","Package":"github.com/kvbreaker/kvbreaker/conformance","Test":"TestA/sub_1"}
{"Action":"fail","Package":"github.com/kvbreaker/kvbreaker/conformance","Test":"TestA"}
{"Action":"pass","Package":"github.com/kvbreaker/kvbreaker/conformance","Test":"TestB"}
{"Action":"output","Package":"github.com/kvbreaker/kvbreaker/backends/redis","Test":"TestRobustness/single/seed=42","Output":"    replay: go test -run 'TestRobustness/single' ./backends/redis/ -args -seed 42\n"}
{"Action":"fail","Package":"github.com/kvbreaker/kvbreaker/backends/redis","Test":"TestRobustness/single/seed=42"}
{"Action":"fail","Package":"github.com/kvbreaker/kvbreaker/backends/redis","Test":"TestRobustness/single"}
{"Action":"fail","Package":"github.com/kvbreaker/kvbreaker/backends/redis","Test":"TestRobustness"}
{"Action":"output","Package":"github.com/kvbreaker/kvbreaker","Output":"panic: test timed out after 30m0s\n"}
{"Action":"fail","Package":"github.com/kvbreaker/kvbreaker"}
`

func TestParseAndReplay(t *testing.T) {
	fails, passed, err := parse(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if passed != 1 {
		t.Errorf("passed = %d, want 1", passed)
	}
	flags := []string{"-race", "-short", "-count=1", "-p", "4"}
	var got []string
	for _, f := range fails {
		got = append(got, f.replay(flags))
	}
	want := []string{
		`go test -race -short -count=1 -run '^TestA$/^sub_1$' ./conformance`,
		`go test -race -short -count=1 -run '^TestRobustness$/^single$/^seed=42$' ./backends/redis -args -seed 42`,
		`go test -race -short -count=1 .`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("replay commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
