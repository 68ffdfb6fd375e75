package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// closing is the count line CI reads.
var closing = regexp.MustCompile(`(?m)^matrix: (\d+) passed, (\d+) failed, (\d+) skipped$`)

// ev builds a go test -json stream.
type ev struct{ lines []string }

func (s *ev) add(action, pkg, test, output string) *ev {
	b, err := json.Marshal(event{Action: action, Package: pkg, Test: test, Output: output})
	if err != nil {
		panic(err)
	}
	s.lines = append(s.lines, string(b))
	return s
}

// result adds a test's run, its output lines and its outcome.
func (s *ev) result(pkg, test, action string, output ...string) *ev {
	s.add("run", pkg, test, "")
	s.add("output", pkg, test, "=== RUN   "+test+"\n")
	for _, o := range output {
		s.add("output", pkg, test, o+"\n")
	}
	s.add("output", pkg, test, "--- "+strings.ToUpper(action)+": "+test+" (0.00s)\n")
	return s.add(action, pkg, test, "")
}

func (s *ev) String() string { return strings.Join(s.lines, "\n") + "\n" }

func runOn(t *testing.T, input string, o options) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := run(strings.NewReader(input), &out, o)
	return out.String(), code
}

// row returns the matrix line of group.
func row(out, group string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == group {
			return strings.Join(f, " ")
		}
	}
	return ""
}

func TestRealMemoryRun(t *testing.T) {
	// go test -json -run TestConformance ./backends/memory/, recorded.
	b, err := os.ReadFile("testdata/memory.json")
	if err != nil {
		t.Fatal(err)
	}
	out, code := runOn(t, string(b), options{})
	if code != 0 {
		t.Fatalf("exit %d; want 0 for a passing run:\n%s", code, out)
	}
	for _, want := range []string{"group memory", "traits pass", "concurrent-cas-linearizable pass", "suite pass"} {
		if got := row(out, strings.Fields(want)[0]); got != want {
			t.Errorf("row %q; want %q\n%s", got, want, out)
		}
	}
	if row(out, "report") != "" {
		t.Errorf("the suite's report subtest is shown as a group:\n%s", out)
	}
	m := closing.FindStringSubmatch(out)
	if m == nil || m[1] == "0" || m[2] != "0" {
		t.Errorf("closing line %q; want some passed and 0 failed\n%s", m, out)
	}
	if !strings.Contains(out, "ok  \tgithub.com/kvbreaker/kvbreaker/backends/memory") {
		t.Errorf("the package's ok line is not passed on:\n%s", out)
	}
}

// mixed is a run with two backends, a failed group, skips and a failing
// non-conformance test.
func mixed() string {
	const etcd = "example.com/kv/backends/etcd"
	const ctr = "example.com/kv/internal/testservers/containers"
	s := &ev{}
	s.result(etcd, "TestConformance/traits", "pass")
	s.result(etcd, "TestConformance/create-only", "fail", "    cases.go:10: create-only: a create over an existing key succeeded")
	s.result(etcd, "TestConformance/expiry", "skip", "    conformance.go:99: slow case skipped under -short")
	s.result(etcd, "TestConformance/report", "pass")
	s.result(etcd, "TestConformance", "fail")
	s.result(etcd, "TestLeases", "pass")
	s.add("output", etcd, "", "FAIL\texample.com/kv/backends/etcd\t1.0s\n").add("fail", etcd, "", "")
	s.result(ctr, "TestConformanceEtcd", "skip", "    containers_test.go:80: container mode is off: set KVBREAKER_CONTAINERS=1")
	s.result(ctr, "TestConformanceDynamoDB/traits", "pass")
	s.result(ctr, "TestConformanceDynamoDB/create-only", "pass")
	s.result(ctr, "TestConformanceDynamoDB", "pass")
	s.result(ctr, "TestConfigFromEnv", "fail", "    containers_test.go:300: configFrom = wrong")
	s.add("output", ctr, "", "FAIL\texample.com/kv/internal/testservers/containers\t0.1s\n").add("fail", ctr, "", "")
	return s.String()
}

func TestMixedRun(t *testing.T) {
	out, code := runOn(t, mixed(), options{})
	if code != 1 {
		t.Fatalf("exit %d; want 1 when a test failed:\n%s", code, out)
	}
	for _, want := range []string{
		"group etcd containers-etcd containers-dynamodb",
		"traits pass - pass",
		"create-only FAIL - pass",
		"expiry skip - -",
		"suite FAIL skip pass",
	} {
		if got := row(out, strings.Fields(want)[0]); got != want {
			t.Errorf("row %q; want %q", got, want)
		}
	}
	for _, want := range []string{
		"expiry skipped: slow case skipped under -short",
		"suite skip: container mode is off: set KVBREAKER_CONTAINERS=1",
		"create-only: a create over an existing key succeeded", // a failed group's output
		"configFrom = wrong", // a failed test outside the suite
		"FAIL\texample.com/kv/backends/etcd",
		"etcd (example.com/kv/backends/etcd TestConformance, 0.0s): 1 passed, 1 failed, 1 skipped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if m := closing.FindStringSubmatch(out); m == nil || m[1] != "6" || m[2] != "3" || m[3] != "2" {
		t.Errorf("closing line %q; want 6 passed, 3 failed, 2 skipped\n%s", m, out)
	}
	if strings.Contains(out, "TestLeases (0.00s)") {
		t.Errorf("a passing test's output is printed without -v:\n%s", out)
	}
}

func TestBackendSelection(t *testing.T) {
	out, code := runOn(t, mixed(), options{backends: "containers-dynamodb"})
	if got := row(out, "group"); got != "group containers-dynamodb" {
		t.Errorf("header %q; want only the selected column\n%s", got, out)
	}
	if code != 1 {
		t.Errorf("exit %d; want 1: other packages still failed", code)
	}

	// Only the dynamodb column's package, passing.
	var only []string
	for l := range strings.SplitSeq(mixed(), "\n") {
		if strings.Contains(l, "TestConformanceDynamoDB") {
			only = append(only, l)
		}
	}
	in := strings.Join(only, "\n")
	if out, code := runOn(t, in, options{backends: "containers-dynamodb"}); code != 0 {
		t.Errorf("exit %d; want 0 for a passing selected column:\n%s", code, out)
	}
	out, code = runOn(t, in, options{backends: "etcd"})
	if code != 1 || !strings.Contains(out, `backend "etcd" has no conformance results in this run (columns seen: containers-dynamodb)`) {
		t.Errorf("selecting a column with no results: exit %d; want 1 with the reason:\n%s", code, out)
	}
}

func TestNoEvents(t *testing.T) {
	out, code := runOn(t, "go: cannot find main module\n", options{})
	if code != 1 || !strings.Contains(out, "no go test -json events") || !strings.Contains(out, "go: cannot find main module") {
		t.Errorf("exit %d; want 1, the plain line passed on and the reason:\n%s", code, out)
	}
}

func TestBuildFailure(t *testing.T) {
	s := &ev{}
	b, _ := json.Marshal(event{Action: "build-output", ImportPath: "example.com/kv/core [example.com/kv/core.test]", Output: "core/x.go:3:1: syntax error\n"})
	s.lines = append(s.lines, string(b))
	b, _ = json.Marshal(event{Action: "build-fail", ImportPath: "example.com/kv/core [example.com/kv/core.test]"})
	s.lines = append(s.lines, string(b))
	s.result("example.com/kv/backends/memory", "TestConformance/traits", "pass")
	out, code := runOn(t, s.String(), options{})
	if code != 1 || !strings.Contains(out, "core/x.go:3:1: syntax error") || !strings.Contains(out, "build failed: example.com/kv/core") {
		t.Errorf("exit %d; want 1 with the compiler's message:\n%s", code, out)
	}
}

func TestVerbose(t *testing.T) {
	out, code := runOn(t, mixed(), options{verbose: true})
	if code != 1 || !strings.Contains(out, "--- PASS: TestLeases (0.00s)") {
		t.Errorf("-v: exit %d; want every test's output:\n%s", code, out)
	}
}

func TestColumnOrder(t *testing.T) {
	s := &ev{}
	for _, pkg := range []string{"x/internal/testservers/containers", "x/backends/cloudflarekv", "x/backends/zeta", "x/backends/etcd", "x/backends/memory"} {
		test := "TestConformance"
		if strings.HasSuffix(pkg, "containers") {
			test += "Etcd"
		}
		s.result(pkg, test+"/traits", "pass").result(pkg, test, "pass")
	}
	out, code := runOn(t, s.String(), options{})
	if want := "group memory etcd cloudflarekv containers-etcd zeta"; code != 0 || row(out, "group") != want {
		t.Errorf("exit %d, header %q; want 0 and %q", code, row(out, "group"), want)
	}
}

func TestColumnName(t *testing.T) {
	for _, tc := range []struct{ pkg, test, want string }{
		{"example.com/kv/backends/etcd", "TestConformance", "etcd"},
		{"example.com/kv/backends/memory", "TestConformance", "memory"},
		{"example.com/kv/internal/testservers/containers", "TestConformanceEtcd", "containers-etcd"},
		{"example.com/kv/internal/testservers/containers", "TestConformance_DynamoDB", "containers-dynamodb"},
		{"example.com/kv/backends/etcd", "TestConformanceish", ""},
		{"example.com/kv/backends/etcd", "TestStore", ""},
	} {
		if got := columnName(tc.pkg, tc.test); got != tc.want {
			t.Errorf("columnName(%q, %q) = %q; want %q", tc.pkg, tc.test, got, tc.want)
		}
	}
}

// TestTimedOutTestShown: a package that times out mid-test ends with no
// outcome for that test; go test -json puts the panic and its goroutine
// dump in the test's output. The test counts as failed and its output,
// the dump, is printed; the tests that ended keep their outcomes.
func TestTimedOutTestShown(t *testing.T) {
	const pg = "example.com/kv/backends/postgres"
	s := &ev{}
	s.result(pg, "TestFast", "pass")
	s.add("run", pg, "TestHang", "").add("output", pg, "TestHang", "=== RUN   TestHang\n")
	s.add("run", pg, "TestHang/sub", "").add("output", pg, "TestHang/sub", "=== RUN   TestHang/sub\n")
	s.add("output", pg, "TestHang/sub", "panic: test timed out after 30m0s\n")
	s.add("output", pg, "TestHang/sub", "goroutine 21 [select]:\nexample.com/kv/backends/postgres.waitBlocked(...)\n")
	s.add("output", pg, "", "FAIL\texample.com/kv/backends/postgres\t1800.1s\n").add("fail", pg, "", "")
	out, code := runOn(t, s.String(), options{})
	if code != 1 {
		t.Fatalf("exit %d; want 1:\n%s", code, out)
	}
	for _, want := range []string{
		"=== output of example.com/kv/backends/postgres TestHang/sub",
		"panic: test timed out after 30m0s",
		"postgres.waitBlocked(...)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if m := closing.FindStringSubmatch(out); m == nil || m[1] != "1" || m[2] != "2" {
		t.Errorf("closing line %q; want 1 passed and 2 failed (the test and its subtest that never ended)\n%s", m, out)
	}
}
