// Command matrix reads `go test -json` output on standard input and prints
// kvbreaker's integration matrix: for each backend, which conformance groups
// (the top-level subtests of TestConformance) passed, failed or were
// skipped. It also prints what a plain `go test` run would show of failures
// (the output of failed tests and packages, build errors), and a closing
// count line. It exits 1 when anything failed, when a selected backend has
// no conformance results, or when stdin held no test events at all.
//
//	go test -race -json ./... | go run ./tools/matrix
//	go test -json ./backends/etcd/... | go run ./tools/matrix -backend etcd
//
// Columns are named after the test's package: TestConformance in package
// .../backends/etcd is column "etcd"; TestConformanceEtcd in package
// .../internal/testservers/containers is column "containers-etcd" (a suffix
// after "TestConformance" names a backend within a package that tests
// several).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

func main() {
	var o options
	flag.StringVar(&o.backends, "backend", "", "comma-separated columns to show (e.g. etcd or containers-etcd); each must have results")
	flag.BoolVar(&o.verbose, "v", false, "echo every test's output, as go test -v would")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go test -json ./... | go run ./tools/matrix [-backend NAME[,NAME]] [-v]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(os.Stdin, os.Stdout, o))
}

type options struct {
	backends string
	verbose  bool
}

// event is one line of `go test -json` (cmd/test2json), including the build
// events of Go 1.24 and later.
type event struct {
	Time       time.Time
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// outcome of a test or group.
type outcome int8

const (
	none outcome = iota
	pass
	fail
	skip
)

func (o outcome) String() string {
	switch o {
	case pass:
		return "pass"
	case fail:
		return "FAIL"
	case skip:
		return "skip"
	}
	return "-"
}

// column is one backend's conformance results.
type column struct {
	name    string
	pkg     string
	test    string // the TestConformance* test
	result  outcome
	elapsed float64
	reason  string // why the whole suite was skipped or failed
	groups  map[string]outcome
	why     map[string]string // skip reasons per group
}

// maxOutput bounds the output kept per test.
const maxOutput = 256 << 10

type key struct{ pkg, test string }

type collector struct {
	w       io.Writer
	verbose bool

	events  int
	outputs map[key]*strings.Builder
	columns map[string]*column
	order   []string // column names in first-seen order
	groups  []string // group names in first-seen order

	passed, failed, skipped int
	failures                []string // "pkg Test" of failed tests, in order
	running                 []key    // tests run and not yet ended, in order
	failedPkgs              []string
	buildFailed             []string
}

func newCollector(w io.Writer, verbose bool) *collector {
	return &collector{w: w, verbose: verbose, outputs: map[key]*strings.Builder{}, columns: map[string]*column{}}
}

// columnName returns the backend column of a top-level test, or "" when it
// is not a conformance test.
func columnName(pkg, test string) string {
	suffix, ok := strings.CutPrefix(test, "TestConformance")
	if !ok {
		return ""
	}
	if suffix != "" && !unicode.IsUpper(rune(suffix[0])) && suffix[0] != '_' {
		return "" // TestConformanceish is some other test
	}
	name := path.Base(pkg)
	if suffix = strings.ToLower(strings.TrimLeft(suffix, "_")); suffix != "" {
		name += "-" + suffix
	}
	return name
}

func (c *collector) add(e event) {
	c.events++
	switch e.Action {
	case "build-output":
		fmt.Fprint(c.w, e.Output)
		return
	case "build-fail":
		c.buildFailed = append(c.buildFailed, e.ImportPath)
		return
	}
	k := key{e.Package, e.Test}
	if e.Action == "output" {
		if c.verbose {
			fmt.Fprint(c.w, e.Output)
		}
		b := c.outputs[k]
		if b == nil {
			b = &strings.Builder{}
			c.outputs[k] = b
		}
		if b.Len() < maxOutput {
			b.WriteString(e.Output)
		}
		if e.Test == "" && !c.verbose && isPackageLine(e.Output) {
			fmt.Fprint(c.w, e.Output)
		}
		return
	}
	if e.Action == "run" {
		c.running = append(c.running, k)
		return
	}
	var o outcome
	switch e.Action {
	case "pass":
		o = pass
	case "fail":
		o = fail
	case "skip":
		o = skip
	default:
		return // start, run, pause, cont, bench
	}
	if e.Test == "" {
		if o == fail {
			c.failedPkgs = append(c.failedPkgs, e.Package)
			c.unfinished(e.Package)
		}
		return
	}
	if i := slices.Index(c.running, k); i >= 0 {
		c.running = slices.Delete(c.running, i, i+1)
	}
	switch o {
	case pass:
		c.passed++
	case fail:
		c.failed++
		c.failures = append(c.failures, e.Package+" "+e.Test)
	case skip:
		c.skipped++
	}
	top, group, _ := strings.Cut(e.Test, "/")
	name := columnName(e.Package, top)
	if name == "" {
		return
	}
	col := c.columns[name]
	if col == nil {
		col = &column{name: name, pkg: e.Package, test: top, groups: map[string]outcome{}, why: map[string]string{}}
		c.columns[name] = col
		c.order = append(c.order, name)
	}
	switch {
	case group == "":
		col.result, col.elapsed = o, e.Elapsed
		if o != pass {
			col.reason = lastMessage(c.outputs[k])
		}
	case strings.Contains(group, "/") || group == "report":
		// deeper subtests belong to their group; "report" is the suite's log
	default:
		if !slices.Contains(c.groups, group) {
			c.groups = append(c.groups, group)
		}
		col.groups[group] = o
		if o == skip {
			col.why[group] = lastMessage(c.outputs[k])
		}
	}
}

// unfinished counts as failed every test of pkg that ran and never ended:
// a timeout or a crash ends the package mid-test, and go test -json puts
// the panic and its goroutine dump in that test's output, not the
// package's.
func (c *collector) unfinished(pkg string) {
	c.running = slices.DeleteFunc(c.running, func(k key) bool {
		if k.pkg != pkg {
			return false
		}
		c.failed++
		c.failures = append(c.failures, k.pkg+" "+k.test)
		return true
	})
}

// isPackageLine reports whether a package-level output line is go test's
// per-package summary ("ok", "FAIL", "?") rather than test chatter.
func isPackageLine(s string) bool {
	return strings.HasPrefix(s, "ok  ") || strings.HasPrefix(s, "FAIL") || strings.HasPrefix(s, "?   ") ||
		strings.HasPrefix(s, "panic:") || strings.HasPrefix(s, "--- FAIL")
}

// lastMessage returns the last log line of a test's output that is not go
// test's own "=== RUN" / "--- SKIP" chatter: for a skipped test, its reason.
func lastMessage(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		// "file_test.go:12: reason" ⇒ "reason"
		if f, rest, ok := strings.Cut(l, ": "); ok && strings.Contains(f, ".go:") && !strings.Contains(f, " ") {
			l = rest
		}
		return l
	}
	return ""
}

func run(r io.Reader, w io.Writer, o options) int {
	c := newCollector(w, o.verbose)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	nonJSON := 0
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// go test's own errors (e.g. a package that does not build,
			// before Go 1.24) arrive as plain lines: pass them on.
			nonJSON++
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		c.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(w, "matrix: reading stdin: %v\n", err)
		return 1
	}
	return c.finish(o, nonJSON)
}

func (c *collector) finish(o options, nonJSON int) int {
	bad := false
	if !c.verbose {
		// go test -json attributes each (sub)test's output to it, so
		// print every failed one; subtests fail before their parents.
		for _, f := range c.failures {
			pkg, test, _ := strings.Cut(f, " ")
			c.printOutput(pkg, test)
		}
		for _, p := range c.failedPkgs {
			if !slices.ContainsFunc(c.failures, func(f string) bool { return strings.HasPrefix(f, p+" ") }) {
				// a panic, timeout or TestMain failure outside any test
				c.printOutput(p, "")
			}
		}
	}

	selected, err := c.selectColumns(o.backends)
	if err != nil {
		fmt.Fprintf(c.w, "matrix: %v\n", err)
		bad = true
	}
	c.printMatrix(selected)

	if c.events == 0 {
		fmt.Fprintf(c.w, "matrix: no go test -json events on stdin (%d other lines): did go test run with -json?\n", nonJSON)
		bad = true
	}
	if len(c.buildFailed) > 0 {
		fmt.Fprintf(c.w, "matrix: build failed: %s\n", strings.Join(c.buildFailed, ", "))
		bad = true
	}
	if c.failed > 0 || len(c.failedPkgs) > 0 {
		fmt.Fprintf(c.w, "matrix: failed packages: %s\n", strings.Join(c.failedPkgs, ", "))
		bad = true
	}
	for _, name := range selected {
		if c.columns[name].result == fail {
			bad = true
		}
	}
	fmt.Fprintf(c.w, "matrix: %d passed, %d failed, %d skipped\n", c.passed, c.failed, c.skipped)
	if bad {
		return 1
	}
	return 0
}

func (c *collector) printOutput(pkg, test string) {
	b := c.outputs[key{pkg, test}]
	if b == nil || b.Len() == 0 {
		return
	}
	name := pkg
	if test != "" {
		name += " " + test
	}
	fmt.Fprintf(c.w, "\n=== output of %s\n%s", name, b.String())
	if b.Len() >= maxOutput {
		fmt.Fprintf(c.w, "[output truncated at %d KiB]\n", maxOutput>>10)
	}
}

// selectColumns returns the columns to print: all, or those named in spec,
// each of which must have results.
func (c *collector) selectColumns(spec string) ([]string, error) {
	if strings.TrimSpace(spec) == "" {
		names := slices.Clone(c.order)
		slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
		return names, nil
	}
	var names []string
	var errs []error
	for n := range strings.SplitSeq(spec, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if c.columns[n] == nil {
			have := strings.Join(c.order, ", ")
			if have == "" {
				have = "none"
			}
			errs = append(errs, fmt.Errorf("backend %q has no conformance results in this run (columns seen: %s)", n, have))
			continue
		}
		names = append(names, n)
	}
	return names, errors.Join(errs...)
}

// preferred is the order of the known columns: in-process first, then the
// real servers, then the container mode; others follow in first-seen order.
var preferred = []string{"memory", "etcd", "dynamodb", "cloudflarekv", "redis", "postgres", "mysql", "sqlite", "nats", "containers-etcd", "containers-dynamodb"}

func rank(name string) int {
	if i := slices.Index(preferred, name); i >= 0 {
		return i
	}
	return len(preferred)
}

func (c *collector) printMatrix(names []string) {
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(c.w, "\nconformance matrix (rows: groups of TestConformance; columns: backends)\n\n")
	tw := tabwriter.NewWriter(c.w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "group")
	for _, n := range names {
		fmt.Fprintf(tw, "\t%s", n)
	}
	fmt.Fprintln(tw)
	for _, g := range c.groups {
		fmt.Fprint(tw, g)
		for _, n := range names {
			fmt.Fprintf(tw, "\t%s", c.columns[n].groups[g])
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "suite")
	for _, n := range names {
		fmt.Fprintf(tw, "\t%s", c.columns[n].result)
	}
	fmt.Fprintln(tw)
	_ = tw.Flush()
	fmt.Fprintln(c.w)
	for _, n := range names {
		col := c.columns[n]
		var p, f, s int
		for _, o := range col.groups {
			switch o {
			case pass:
				p++
			case fail:
				f++
			case skip:
				s++
			}
		}
		fmt.Fprintf(c.w, "%s (%s %s, %.1fs): %d passed, %d failed, %d skipped", n, col.pkg, col.test, col.elapsed, p, f, s)
		if col.result != pass && col.reason != "" {
			fmt.Fprintf(c.w, "; suite %s: %s", col.result, col.reason)
		}
		fmt.Fprintln(c.w)
		for _, g := range c.groups {
			if why := col.why[g]; why != "" {
				fmt.Fprintf(c.w, "  %s skipped: %s\n", g, why)
			}
		}
	}
	fmt.Fprintln(c.w)
}
