package dashboard

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/store"
)

// The costs chart: known cost per UTC day, stacked by executor, drawn as
// inline SVG on the server. A day with spans that have no price is marked
// under its bar: the bar is a floor, not a bill.

// Chart geometry, in SVG user units (the SVG scales to its box).
const (
	chartW      = 720
	chartH      = 260
	chartLeft   = 84
	chartRight  = 12
	chartTop    = 12
	chartBottom = 40
)

// palette colours executors in order of first appearance.
func palette() []string {
	return []string{"#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626"}
}

type chart struct {
	W, H    int
	Bars    []bar
	Ticks   []tick
	XLabels []xlabel
	Legend  []legend
	Unknown []marker
	Empty   bool // no span in the window
	Left    float64
	Right   float64
	Bottom  float64
}

type bar struct {
	X, Y, W, H float64
	Color      string
	Title      string
}

type tick struct {
	Y     float64
	Label string
}

type xlabel struct {
	X     float64
	Label string
}

type legend struct {
	Color, Name string
}

type marker struct {
	X, Y  float64
	Title string
}

// costTotal is the spend of one executor or repository (Key) over the
// window, every lane.
type costTotal struct {
	Key          string
	Spans        int
	Priced       int
	USD          *float64 // nil when no span had a price
	Seconds      float64
	InputTokens  int64
	OutputTokens int64
}

// sumCosts sums rows by key(row), in the order keys first appear.
func sumCosts[R any](rows []R, key func(R) string, day func(R) store.CostDay) []costTotal {
	var out []costTotal
	idx := map[string]int{}
	for _, row := range rows {
		k, r := key(row), day(row)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, costTotal{Key: k})
		}
		t := &out[i]
		t.Spans += r.Spans
		t.Priced += r.Priced
		t.Seconds += r.Seconds
		t.InputTokens += r.InputTokens
		t.OutputTokens += r.OutputTokens
		if r.USD != nil {
			sum := *r.USD
			if t.USD != nil {
				sum += *t.USD
			}
			t.USD = &sum
		}
	}
	return out
}

// totals sums the rows by executor (a model, model:<name>, is one), every
// lane, by name.
func totals(rows []store.CostDay) []costTotal {
	out := sumCosts(rows, func(r store.CostDay) string { return r.Executor },
		func(r store.CostDay) store.CostDay { return r })
	slices.SortFunc(out, func(a, b costTotal) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// costChart lays out the chart of days days from since.
func costChart(since time.Time, days int, rows []store.CostDay) chart {
	c := chart{W: chartW, H: chartH, Left: chartLeft, Right: chartW - chartRight, Bottom: chartH - chartBottom, Empty: len(rows) == 0}
	perDay, names := costDays(since, days, rows)
	colors := map[string]string{}
	pal := palette()
	for i, n := range names {
		colors[n] = pal[i%len(pal)]
		c.Legend = append(c.Legend, legend{Color: colors[n], Name: n})
	}
	maxUSD := 0.0
	for _, d := range perDay {
		sum := 0.0
		for _, v := range d.usd {
			sum += v
		}
		maxUSD = math.Max(maxUSD, sum)
	}
	top := niceCeil(maxUSD)
	plotH := float64(chartH - chartTop - chartBottom)
	c.Ticks = yTicks(top, plotH)
	slot := float64(chartW-chartLeft-chartRight) / float64(days)
	every := int(math.Ceil(float64(days) / 8))
	for i, d := range perDay {
		day := since.AddDate(0, 0, i)
		x := chartLeft + slot*float64(i)
		if i%every == 0 {
			c.XLabels = append(c.XLabels, xlabel{X: x + slot/2, Label: day.Format("01-02")})
		}
		y := chartTop + plotH
		for _, n := range names {
			v, ok := d.usd[n]
			if !ok || v <= 0 || top == 0 {
				continue
			}
			h := plotH * v / top
			y -= h
			c.Bars = append(c.Bars, bar{X: x + slot*0.15, Y: y, W: slot * 0.7, H: h, Color: colors[n],
				Title: fmt.Sprintf("%s %s: $%.4f", day.Format(time.DateOnly), n, v)})
		}
		if d.unpriced > 0 {
			c.Unknown = append(c.Unknown, marker{X: x + slot/2, Y: chartTop + plotH + 6,
				Title: fmt.Sprintf("%s: %d span(s) without a price", day.Format(time.DateOnly), d.unpriced)})
		}
	}
	return c
}

// dayCost is one day of the chart: dollars by executor and the spans
// without a price.
type dayCost struct {
	usd      map[string]float64
	unpriced int
}

// costDays buckets the rows into days days from since; names are the
// executors that appear, sorted. Rows outside the range are left out.
func costDays(since time.Time, days int, rows []store.CostDay) (perDay []dayCost, names []string) {
	perDay = make([]dayCost, days)
	seen := map[string]bool{}
	for _, r := range rows {
		d, err := time.Parse(time.DateOnly, r.Day)
		if err != nil {
			continue
		}
		i := int(d.Sub(since) / (24 * time.Hour))
		if i < 0 || i >= days {
			continue
		}
		if !seen[r.Executor] {
			names = append(names, r.Executor)
			seen[r.Executor] = true
		}
		if perDay[i].usd == nil {
			perDay[i].usd = map[string]float64{}
		}
		if r.USD != nil {
			perDay[i].usd[r.Executor] += *r.USD
		}
		perDay[i].unpriced += r.Spans - r.Priced
	}
	slices.Sort(names)
	return perDay, names
}

// yTicks are the y axis's five ticks, 0 to top, on a plot plotH high,
// with enough decimals that they differ.
func yTicks(top, plotH float64) []tick {
	decimals := 2
	for step := top / 4; decimals < 6; decimals++ {
		if v := step * math.Pow(10, float64(decimals)); math.Abs(v-math.Round(v)) < 1e-9 {
			break
		}
	}
	var ticks []tick
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		ticks = append(ticks, tick{Y: chartTop + plotH*(1-float64(i)/4), Label: fmt.Sprintf("$%.*f", decimals, v)})
	}
	return ticks
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten; 0 becomes 1, so
// an empty chart still has an axis.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
