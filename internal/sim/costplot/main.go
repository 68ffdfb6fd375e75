// Command costplot draws docs/cost-feed.svg: store requests a second
// against deliveries a second, per process, for a Breaker without a
// mirror, with its decision cache, and with a mirror on each server store
// that follows, from one run of the simulator's default fleet (each
// line's slope is the run's requests per delivery; a mirror's line starts
// at what its feed's beats cost a second, model.FeedModels: on a store whose
// mirror beats on demand (etcd, Redis, PostgreSQL, NATS), the fleet's
// beats while it decides all along, and none while it is idle; a
// dashed line is that store with a beat per process, as Follow beats), and
// the break-even point
// of each mirror against no mirror and against the cache: the deliveries a
// second above which the mirror costs fewer requests.
//
//	go run ./internal/sim/costplot > docs/cost-feed.svg
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/model"
	"github.com/kvbreaker/kvbreaker/internal/sim"
)

type line struct {
	name         string
	fixed, slope float64 // requests a second per process: fixed + slope × deliveries a second
	color        string
	dashed       bool
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "costplot:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	rep, err := sim.Run(sim.Scenario{Seed: 1})
	if err != nil {
		return err
	}
	var lines []line
	procs := float64(rep.Processes)
	for _, m := range rep.Models {
		switch m.Model {
		case "kvbreaker":
			lines = append(lines, line{"no mirror", 0, m.RequestsPer1000Deliveries / 1000, "#444", false})
		case "kvbreaker+cache":
			lines = append(lines, line{"decision cache", 0, m.RequestsPer1000Deliveries / 1000, "#888", false})
		}
	}
	colors := map[string]string{"etcd": "#1f77b4", "redis": "#d62728", "postgres": "#2ca02c", "nats": "#9467bd"}
	for _, m := range rep.Models {
		if m.Mirror == nil {
			continue
		}
		for _, f := range m.Mirror.Feeds {
			c, ok := colors[f.Store]
			if !ok {
				continue
			}
			perDelivery := float64(f.FeedReads+f.BreakerRequests) / float64(rep.Trace.Deliveries)
			name := "mirror, " + f.Store
			if fm := model.FeedModels[f.Store]; fm.Demand != nil && fm.Demand.PerProcess {
				name += ", each process on demand"
			} else if fm.Demand != nil {
				name += ", beats on demand"
			}
			lines = append(lines, line{name, f.BeatRequestsPerSecond / procs, perDelivery, c, false})
			if fm := model.FeedModels[f.Store]; fm.Demand != nil {
				// Follow's beats: each process's own, every half
				// heartbeat at a quarter of MirrorStaleness.
				hb := kvbreaker.Settings{}.WithDefaults().MirrorStaleness / 4
				perSecond := float64(fm.PerBeat()*fm.Beats(hb, time.Hour)) / time.Hour.Seconds()
				lines = append(lines, line{"mirror, " + f.Store + ", a beat per process", perSecond, perDelivery, c, true})
			}
		}
	}
	if len(lines) < 3 {
		return fmt.Errorf("the run reported %d of the lines", len(lines))
	}
	draw(w, lines)
	return nil
}

// draw writes the plot: x from 0 to xMax deliveries a second per
// process, y from 0 to yMax requests a second per process.
func draw(w io.Writer, lines []line) {
	const (
		width, height    = 860.0, 500.0
		left, right      = 60.0, 390.0
		top, bottom      = 20.0, 50.0
		xMax, yMax       = 10.0, 40.0
		plotW, plotH     = width - left - right, height - top - bottom
		fontAttributes   = `font-family="sans-serif" font-size="12"`
		legendAttributes = `font-family="sans-serif" font-size="11"`
	)
	x := func(v float64) float64 { return left + v/xMax*plotW }
	y := func(v float64) float64 { return top + plotH - min(v, yMax)/yMax*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%g" height="%g" fill="white"/>`+"\n", width, height)
	for v := 0.0; v <= xMax; v += 2 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle" %s>%g</text>`+"\n", x(v), y(0), x(v), y(yMax), x(v), y(0)+16, fontAttributes, v)
	}
	for v := 0.0; v <= yMax; v += 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end" %s>%g</text>`+"\n", x(0), y(v), x(xMax), y(v), x(0)-6, y(v)+4, fontAttributes, v)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" %s>deliveries a second, per process</text>`+"\n", left+plotW/2, height-10, fontAttributes)
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle" %s>store requests a second, per process</text>`+"\n", top+plotH/2, fontAttributes)
	for i, l := range lines {
		// The line, clipped at yMax.
		x2 := xMax
		if l.fixed+l.slope*xMax > yMax {
			x2 = (yMax - l.fixed) / l.slope
		}
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", x(0), y(l.fixed), x(x2), y(l.fixed+l.slope*x2), l.color, dash)
		label := fmt.Sprintf("%s: %.3g/s + %.3g per delivery", l.name, l.fixed, l.slope)
		if l.fixed > 0 {
			label += breakEven(l, lines[:2])
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%.1f" %s>%s</text>`+"\n",
			width-right+10, top+10+float64(i)*46, width-right+30, top+10+float64(i)*46, l.color, dash, width-right+10, top+24+float64(i)*46, legendAttributes, wrap(label, width-right+10))
	}
	b.WriteString("</svg>\n")
	_, _ = io.WriteString(w, b.String())
}

// breakEven names the deliveries a second above which l costs less than
// each of base.
func breakEven(l line, base []line) string {
	s := ""
	for _, o := range base {
		if o.slope > l.slope {
			s += fmt.Sprintf("; cheaper than %s above %.1f/s", o.name, (l.fixed-o.fixed)/(o.slope-l.slope))
		}
	}
	return s
}

// wrap splits a label at "; " into tspans that start at x.
func wrap(s string, x float64) string {
	parts := strings.Split(s, "; ")
	if len(parts) == 1 {
		return s
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out += fmt.Sprintf(`<tspan x="%g" dy="12">%s</tspan>`, x, p)
	}
	return out
}
