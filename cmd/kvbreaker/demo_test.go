package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// demoPkg is the program make demo runs, simulate alone: a package of the
// root module (rootDir), built there with demoEnv as the Makefile builds
// it.
const (
	demoPkg = "./internal/demo"
	rootDir = "../.."
)

// demoEnv is the environment make demo runs the demo build in (the
// Makefile's demo target, which TestDemoBuildIsSmall in internal/demo
// holds to the same list).
var demoEnv = []string{"GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-tags=kvbreaker_nohostkey"}

// buildDemo builds the make demo program as make demo does.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kvbreaker-demo")
	cmd := exec.Command("go", "build", "-o", bin, demoPkg)
	cmd.Dir = rootDir
	cmd.Env = append(os.Environ(), demoEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s (in %s, %v): %v\n%s", demoPkg, rootDir, demoEnv, err, out)
	}
	return bin
}

// wallRE is what differs between two runs of the same simulation: the
// wall time it took, in the table's first line and in the JSON.
var wallRE = regexp.MustCompile(`simulated in [0-9.]+s|"wall_ms": [0-9.e+-]+`)

// TestDemoPrintsSimulates: the demo build (make demo) and the full
// command's simulate print the same report, byte for byte but for the
// wall time, for the same flags, and fail the same bad flags with the
// same error and exit code. The control: runs with a different seed
// must differ, or the comparison could not fail.
func TestDemoPrintsSimulates(t *testing.T) {
	bin := buildDemo(t)
	demo := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s %v: %v", bin, args, err)
		}
		return code, out.String(), errOut.String()
	}
	mask := func(s string) string { return wallRE.ReplaceAllString(s, "<wall>") }
	cases := [][]string{
		small,
		append(slices.Clone(small), "--format", "json", "--races"),
		append(slices.Clone(small), "--store-ttl", "10m", "--popularity", "zipf", "--seed", "7"),
		append(slices.Clone(small), "--format", "json", "--max-recovery-delay", "2h", "--release-ramp", "10m", "--mirror-delay", "0"),
		{"simulate", "--help"},
		{"--hosts", "40", "--duration", "1h"}, // the demo without the word simulate
	}
	for _, args := range cases {
		full := args
		if args[0] != "simulate" {
			full = append([]string{"simulate"}, args...)
		}
		code, out, errOut := runCmd(full...)
		dcode, dout, derrOut := demo(args...)
		if code != exitOK || dcode != exitOK || errOut != "" || derrOut != "" {
			t.Fatalf("%v: kvbreaker exit %d, stderr %q; demo exit %d, stderr %q", args, code, errOut, dcode, derrOut)
		}
		if mask(out) != mask(dout) {
			t.Errorf("%v: the demo's output differs from kvbreaker simulate's:\n%s\n--- demo:\n%s", args, out, dout)
		}
	}
	_, out, _ := runCmd(small...)
	if _, dout, _ := demo(append(slices.Clone(small), "--seed", "2")...); mask(out) == mask(dout) {
		t.Errorf("seeds 1 and 2 print the same report: the comparison cannot fail")
	}
	// A usage error: the same message and exit code; only the hint to
	// --help names a different program.
	for _, args := range [][]string{{"--bogus"}, {"--hosts", "0"}, {"now"}, {"--format", "xml"}, {"--state-ttl", "10m"}} {
		code, _, errOut := runCmd(append([]string{"simulate"}, args...)...)
		dcode, _, derrOut := demo(args...)
		first := func(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }
		if code != exitUsage || dcode != code || first(errOut) != first(derrOut) {
			t.Errorf("%v: kvbreaker exit %d %q, demo exit %d %q", args, code, first(errOut), dcode, first(derrOut))
		}
	}
}

// readmeTable is a Markdown table of the README: its header cells and its
// rows, each a row name and its cells by header.
type readmeTable struct {
	header []string
	rows   [][]string
}

// tableWithColumns is the first table in the Markdown text whose header
// holds every one of cols (without case).
func tableWithColumns(text string, cols ...string) (readmeTable, bool) {
	var blocks [][][]string // tables: lines of cells
	prev := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			prev = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if !prev {
			blocks = append(blocks, nil)
		}
		blocks[len(blocks)-1] = append(blocks[len(blocks)-1], cells)
		prev = true
	}
	for _, b := range blocks {
		if len(b) < 2 {
			continue
		}
		ok := true
		for _, c := range cols {
			ok = ok && slices.ContainsFunc(b[0], func(h string) bool { return strings.EqualFold(h, c) })
		}
		if ok {
			return readmeTable{header: b[0], rows: b[2:]}, true // b[1] is the |---| line
		}
	}
	return readmeTable{}, false
}

// figureRE is a table cell: a figure and its ratio to the reference,
// "4,030.6 (0.989×)".
var figureRE = regexp.MustCompile(`^([0-9][0-9,]*(?:\.[0-9]+)?) \(([0-9]+(?:\.[0-9]+)?)×\)$`)

// sameRounded reports whether got, rounded to the decimals of shown (a
// figure with thousands separators), is shown.
func sameRounded(got float64, shown string) bool {
	shown = strings.ReplaceAll(shown, ",", "")
	decimals := 0
	if i := strings.IndexByte(shown, '.'); i >= 0 {
		decimals = len(shown) - i - 1
	}
	return strconv.FormatFloat(got, 'f', decimals, 64) == shown
}

// costFigures are a model's figures in simulate's JSON whose names start
// with requests_per_1000_deliveries (the model's own, and the variants its
// sub-objects give, such as the mirror's without feed reads), by dotted
// name.
func costFigures(prefix string, v any, into map[string]float64) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, x := range obj {
		switch x := x.(type) {
		case float64:
			if strings.HasPrefix(k, "requests_per_1000_deliveries") {
				into[prefix+k] = x
			}
		case map[string]any:
			costFigures(prefix+k+".", x, into)
		case []any:
			// A list of per-store figures (the mirror's feeds) is named
			// by each entry's store: mirror.feeds.redis.requests_….
			for _, e := range x {
				if e, ok := e.(map[string]any); ok {
					if store, ok := e["store"].(string); ok {
						costFigures(prefix+k+"."+store+".", e, into)
					}
				}
			}
		}
	}
}

// TestReadmeStoreCostTable checks the README's store-cost table against a
// fresh simulate run per column (the column's name is the --popularity):
// each row names the simulator's model in backticks, and each cell is one
// of that model's requests_per_1000_deliveries figures, the same one in
// every column, with its ratio to fedify-model's, both as rounded in the
// table. Rows and columns are found by name, so the table may gain rows.
func TestReadmeStoreCostTable(t *testing.T) {
	if testing.Short() {
		t.Skip("two 6-hour simulations (-short)")
	}
	data, err := os.ReadFile(filepath.Join(rootDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	tab, ok := tableWithColumns(string(data), "uniform")
	if !ok || len(tab.rows) == 0 {
		t.Fatal("README.md has no store-cost table (a table with a column \"uniform\")")
	}
	bin := buildDemo(t)
	type run struct {
		models map[string]map[string]float64 // model → dotted figure name → value
		ref    float64
	}
	runs := map[int]run{}
	for col, h := range tab.header[1:] {
		popularity := strings.ToLower(h)
		out, err := exec.Command(bin, "simulate", "--format", "json", "--popularity", popularity).Output()
		if err != nil {
			t.Fatalf("kvbreaker simulate --popularity %s: %v", popularity, err)
		}
		var res struct {
			Models []map[string]any `json:"models"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("simulate --popularity %s: %v", popularity, err)
		}
		r := run{models: map[string]map[string]float64{}}
		for _, m := range res.Models {
			name, _ := m["model"].(string)
			figs := map[string]float64{}
			costFigures("", m, figs)
			r.models[name] = figs
		}
		if r.ref = r.models["fedify-model"]["requests_per_1000_deliveries"]; r.ref == 0 {
			t.Fatalf("simulate --popularity %s: no fedify-model cost to take ratios to", popularity)
		}
		runs[col+1] = r
	}
	tick := regexp.MustCompile("`([^`]+)`")
	for _, row := range tab.rows {
		if len(row) != len(tab.header) {
			t.Errorf("row %q: %d cells, the header has %d", row[0], len(row), len(tab.header))
			continue
		}
		var model string
		for _, m := range tick.FindAllStringSubmatch(row[0], -1) {
			if _, ok := runs[1].models[m[1]]; ok {
				model = m[1]
				break
			}
		}
		if model == "" {
			t.Errorf("row %q names no model of simulate's in backticks (one of %v)", row[0], mapKeys(runs[1].models))
			continue
		}
		fits := fitting(row, runs[1].models[model], func(col int) (map[string]float64, float64) {
			return runs[col].models[model], runs[col].ref
		})
		// The control: the row with its first figure one unit off in its
		// last digit must fit nothing, or the comparison could not fail.
		off := slices.Clone(row)
		if m := figureRE.FindStringSubmatch(off[1]); m != nil {
			off[1] = bump(m[1]) + " (" + m[2] + "×)"
		}
		if got := fitting(off, runs[1].models[model], func(col int) (map[string]float64, float64) {
			return runs[col].models[model], runs[col].ref
		}); len(got) > 0 {
			t.Errorf("row %q with %q instead of %q still matches %v: the comparison cannot fail", row[0], off[1], row[1], got)
		}
		if len(fits) == 0 {
			var got []string
			for col := 1; col < len(row); col++ {
				r := runs[col]
				for name, v := range r.models[model] {
					got = append(got, fmt.Sprintf("%s %s %.1f (%.4f×)", tab.header[col], name, v, v/r.ref))
				}
			}
			slices.Sort(got)
			t.Errorf("row %q: %v match no fresh figure of %s: %s", row[0], row[1:], model, strings.Join(got, "; "))
			continue
		}
		t.Logf("%s: %v is %s's %s", row[0], row[1:], model, fits[0])
	}
}

// fitting are the names of the figures (of figs, the first column's) that
// fit every cell of row, each column's run given by run.
func fitting(row []string, figs map[string]float64, run func(col int) (map[string]float64, float64)) []string {
	var fits []string
	for name := range figs {
		all := true
		for col := 1; col < len(row); col++ {
			m := figureRE.FindStringSubmatch(row[col])
			colFigs, ref := run(col)
			v, ok := colFigs[name]
			all = all && m != nil && ok && sameRounded(v, m[1]) && sameRounded(v/ref, m[2])
		}
		if all {
			fits = append(fits, name)
		}
	}
	return fits
}

// bump is the figure shown (thousands separators allowed) plus one unit in
// its last digit.
func bump(shown string) string {
	shown = strings.ReplaceAll(shown, ",", "")
	decimals := 0
	if i := strings.IndexByte(shown, '.'); i >= 0 {
		decimals = len(shown) - i - 1
	}
	v, _ := strconv.ParseFloat(shown, 64)
	return strconv.FormatFloat(v+math.Pow10(-decimals), 'f', decimals, 64)
}

func mapKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
