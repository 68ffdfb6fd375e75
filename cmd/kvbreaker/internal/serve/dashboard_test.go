package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/metric"
)

// The dashboard and the documentation it is held to, from this package's
// directory.
const (
	dashboardFile = "../../../../docs/grafana/kvbreaker.json"
	otelDocFile   = "../../../../otelkvbreaker/doc.go"
)

// instrument is one row of otelkvbreaker's Metrics table.
type instrument struct{ name, kind, unit string }

// docTable reads the Metrics table of otelkvbreaker's package
// documentation: "name kind unit attributes" per instrument, up to the
// first blank line.
func docTable(t *testing.T) []instrument {
	t.Helper()
	data, err := os.ReadFile(otelDocFile)
	if err != nil {
		t.Fatal(err)
	}
	var rows []instrument
	in := false
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "//"))
		switch {
		case !in && len(f) >= 3 && f[0] == "name" && f[1] == "kind" && f[2] == "unit":
			in = true
		case in && len(f) == 0:
			return rows
		case in && len(f) >= 3:
			rows = append(rows, instrument{f[0], f[1], f[2]})
		}
	}
	t.Fatalf("%s has no Metrics table", otelDocFile)
	return nil
}

// series is a name a scrape shows and what it measures.
type series struct {
	inst instrument
	// count: a histogram's _count, which counts calls whatever the
	// instrument's unit.
	count bool
}

// exportedNames creates every documented instrument, as its kind and
// unit, on a meter provider with serve's exporter, records once, scrapes,
// and maps each series name the scrape shows to its instrument. The
// exporter's HELP line is the instrument's description, which is set to
// its documented name.
func exportedNames(t *testing.T, rows []instrument) map[string]series {
	t.Helper()
	reg := prometheus.NewRegistry()
	mp, err := newPromProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Shutdown(context.Background())
	ctx := context.Background()
	m := mp.Meter("dashboard-test")
	for _, r := range rows {
		d, u := metric.WithDescription(r.name), metric.WithUnit(r.unit)
		var err error
		switch r.kind {
		case "Int64Counter":
			var c metric.Int64Counter
			if c, err = m.Int64Counter(r.name, d, u); err == nil {
				c.Add(ctx, 1)
			}
		case "Float64Histogram":
			var h metric.Float64Histogram
			if h, err = m.Float64Histogram(r.name, d, u); err == nil {
				h.Record(ctx, 0.5)
			}
		case "Float64Gauge":
			var g metric.Float64Gauge
			if g, err = m.Float64Gauge(r.name, d, u); err == nil {
				g.Record(ctx, 0.5)
			}
		case "Int64Gauge":
			var g metric.Int64Gauge
			if g, err = m.Int64Gauge(r.name, d, u); err == nil {
				g.Record(ctx, 1)
			}
		default:
			t.Fatalf("%s: kind %s: teach exportedNames to create it", r.name, r.kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	byName := map[string]instrument{}
	for _, r := range rows {
		byName[r.name] = r
	}
	help := map[string]instrument{}
	types := map[string]string{}
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && f[1] == "HELP":
			if r, ok := byName[f[3]]; ok {
				help[f[2]] = r
			}
		case len(f) == 4 && f[1] == "TYPE":
			types[f[2]] = f[3]
		}
	}
	names := map[string]series{}
	for family, r := range help {
		if types[family] != "histogram" {
			names[family] = series{inst: r}
			continue
		}
		// A classic histogram's family name is no series PromQL can
		// select; its three series are.
		names[family+"_bucket"] = series{inst: r}
		names[family+"_sum"] = series{inst: r}
		names[family+"_count"] = series{inst: r, count: true}
	}
	if len(help) != len(rows) {
		t.Fatalf("the scrape shows %d of the %d documented instruments:\n%s", len(help), len(rows), rec.Body.String())
	}
	return names
}

// grafanaUnit is the unit a panel showing s must have: seconds as "s",
// a ratio as "none", and a count ({decision}, a histogram's _count) as
// "cps" per second under rate or irate, "short" otherwise.
func grafanaUnit(s series, rated bool) string {
	switch {
	case s.inst.unit == "s" && !s.count:
		return "s"
	case s.inst.unit == "1":
		return "none"
	case rated:
		return "cps"
	default:
		return "short"
	}
}

var (
	// Label matchers and grouping clauses hold label names, not metrics.
	matchers = regexp.MustCompile(`\{[^}]*\}`)
	grouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	metricID = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	rateCall = regexp.MustCompile(`\b(rate|irate)\(\s*$`)
)

// dashboard is the part of a Grafana dashboard the check reads.
type dashboard struct {
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title       string `json:"title"`
	Type        string `json:"type"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a row's
}

// exprMetrics returns the kvbreaker_ metric names of a PromQL expression,
// each with whether rate or irate applies to it.
func exprMetrics(expr string) (names []string, rated []bool) {
	blank := func(s string) string { return strings.Repeat(" ", len(s)) }
	e := matchers.ReplaceAllStringFunc(expr, blank)
	e = grouping.ReplaceAllStringFunc(e, blank)
	for _, loc := range metricID.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		if strings.HasPrefix(id, "kvbreaker") {
			names = append(names, id)
			rated = append(rated, rateCall.MatchString(e[:loc[0]]))
		}
	}
	return names, rated
}

// checkDashboard returns what in the dashboard's JSON does not match the
// exported names: a panel without a kvbreaker metric, a metric no
// documented instrument exports, a unit field that is not its metrics'.
func checkDashboard(data []byte, names map[string]series) []error {
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		return []error{fmt.Errorf("the dashboard is not JSON: %v", err)}
	}
	var errs []error
	if d.SchemaVersion < 39 {
		errs = append(errs, fmt.Errorf("schemaVersion %d: want that of a current Grafana (39 or later)", d.SchemaVersion))
	}
	for _, v := range d.Templating.List {
		ids, _ := exprMetrics(v.Definition)
		for _, id := range ids {
			if _, ok := names[id]; !ok {
				errs = append(errs, fmt.Errorf("variable %s: %s is no exported metric", v.Name, id))
			}
		}
	}
	var panels []panel
	for _, p := range d.Panels {
		panels = append(panels, p)
		panels = append(panels, p.Panels...)
	}
	n := 0
	for _, p := range panels {
		if p.Type == "row" {
			continue
		}
		n++
		units := map[string]bool{}
		found := 0
		for _, tg := range p.Targets {
			ids, rated := exprMetrics(tg.Expr)
			for i, id := range ids {
				s, ok := names[id]
				if !ok {
					errs = append(errs, fmt.Errorf("panel %q: %s is no metric otelkvbreaker documents (as the exporter names them): %s", p.Title, id, tg.Expr))
					continue
				}
				found++
				units[grafanaUnit(s, rated[i])] = true
			}
		}
		if found == 0 {
			errs = append(errs, fmt.Errorf("panel %q: no documented kvbreaker metric in its queries", p.Title))
			continue
		}
		if len(units) != 1 || !units[p.FieldConfig.Defaults.Unit] {
			errs = append(errs, fmt.Errorf("panel %q: unit %q, its metrics' is %v", p.Title, p.FieldConfig.Defaults.Unit, slices.Sorted(maps.Keys(units))))
		}
	}
	if n == 0 {
		errs = append(errs, fmt.Errorf("the dashboard has no panel"))
	}
	return errs
}

// TestDashboardMatchesInstruments: every panel of docs/grafana/kvbreaker.json
// queries metrics that otelkvbreaker documents, under the names serve's
// exporter gives them, and shows them in their unit; and the check fails
// on a misspelt metric, a wrong unit, and a panel that queries nothing of
// kvbreaker.
func TestDashboardMatchesInstruments(t *testing.T) {
	rows := docTable(t)
	names := exportedNames(t, rows)
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range checkDashboard(data, names) {
		t.Error(err)
	}
	// The dashboard shows decisions, transitions, store latency and the
	// mirror: the panels.
	for _, want := range []string{"kvbreaker_decisions_total", "kvbreaker_transitions_total", "kvbreaker_store_call_duration_seconds_bucket", "kvbreaker_mirror_healthy", "kvbreaker_mirror_lag_seconds_bucket"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}

	// Negative controls: each change must be reported.
	for _, c := range []struct{ name, from, to, report string }{
		{"misspelt metric", "kvbreaker_decisions_total{", "kvbreaker_decision_total{", "kvbreaker_decision_total is no metric"},
		{"unit without its suffix", "kvbreaker_clock_offset_seconds{", "kvbreaker_clock_offset{", "kvbreaker_clock_offset is no metric"},
		{"wrong unit", `"unit": "s"`, `"unit": "ms"`, `unit "ms", its metrics' is [s]`},
		{"no kvbreaker metric", "sum(rate(kvbreaker_drops_total{", "sum(rate(up{", "no documented kvbreaker metric"},
	} {
		if !bytes.Contains(data, []byte(c.from)) {
			t.Fatalf("%s: the dashboard has no %s to change", c.name, c.from)
		}
		bad := bytes.Replace(data, []byte(c.from), []byte(c.to), 1)
		errs := checkDashboard(bad, names)
		if !slices.ContainsFunc(errs, func(e error) bool { return strings.Contains(e.Error(), c.report) }) {
			t.Errorf("%s: the check did not report %q: %v", c.name, c.report, errs)
		}
	}
}
