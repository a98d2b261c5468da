package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// chart is a grouped bar chart: groups along x, one bar per series in each
// group, on a linear or logarithmic y axis.
type chart struct {
	title, yLabel string
	// note is a second title line: when and where the numbers were taken.
	note   string
	groups []string
	series []string
	// values[g][s] is the bar of series s in group g; NaN means no bar.
	values [][]float64
	log    bool
}

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
}

const (
	chartW, chartH                = 1000, 520
	marginL, marginR, marginT, mB = 80, 20, 50, 90
)

// axis is the y axis: the value range and its ticks.
type axis struct {
	lo, hi float64
	ticks  []float64
	log    bool
}

// niceAxis returns a linear axis from 0 to a round number ≥ max with about
// five ticks, or a log axis spanning whole decades around [minPos, max].
func niceAxis(minPos, max float64, log bool) axis {
	if log {
		if minPos <= 0 || math.IsInf(minPos, 1) {
			minPos = 1
		}
		if max < minPos {
			max = minPos
		}
		lo := math.Pow(10, math.Floor(math.Log10(minPos)))
		hi := math.Pow(10, math.Ceil(math.Log10(max)))
		if hi <= lo {
			hi = lo * 10
		}
		a := axis{lo: lo, hi: hi, log: true}
		for t := lo; t <= hi*1.0001; t *= 10 {
			a.ticks = append(a.ticks, t)
		}
		return a
	}
	if max <= 0 {
		max = 1
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	a := axis{lo: 0, hi: math.Ceil(max/step) * step}
	for t := 0.0; t <= a.hi+step/2; t += step {
		a.ticks = append(a.ticks, t)
	}
	return a
}

// frac maps v to [0, 1] along the axis (clamped).
func (a axis) frac(v float64) float64 {
	var f float64
	if a.log {
		if v <= 0 {
			return 0
		}
		f = (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	} else {
		f = (v - a.lo) / (a.hi - a.lo)
	}
	return math.Max(0, math.Min(1, f))
}

// short formats a value for labels: 1234567 → "1.23M", 0.25 → "0.25".
func short(v float64) string {
	switch av := math.Abs(v); {
	case av >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case av >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	case av >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case av >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// tickLabel formats an axis tick without needless digits: 0, 0.1, 2000, 10k.
func tickLabel(v float64) string {
	if v >= 1e4 {
		return strconv.FormatFloat(v/1e3, 'g', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// render draws the chart.
func (c *chart) render() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.White}, image.Point{}, draw.Src)
	minPos, max := math.Inf(1), 0.0
	for _, g := range c.values {
		for _, v := range g {
			if math.IsNaN(v) {
				continue
			}
			max = math.Max(max, v)
			if v > 0 {
				minPos = math.Min(minPos, v)
			}
		}
	}
	ax := niceAxis(minPos, max, c.log)
	plotL, plotR, plotT, plotB := marginL, chartW-marginR, marginT, chartH-mB
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	black := color.RGBA{0, 0, 0, 0xff}
	for _, t := range ax.ticks {
		y := plotB - int(ax.frac(t)*float64(plotB-plotT))
		hline(img, plotL, plotR, y, grey)
		label := tickLabel(t)
		text(img, plotL-6-7*len(label), y+4, label, black)
	}
	vline(img, plotL, plotT, plotB, black)
	hline(img, plotL, plotR, plotB, black)
	text(img, plotL, 16, c.title, black)
	text(img, plotL, 31, c.note, color.RGBA{0x55, 0x55, 0x55, 0xff})
	text(img, 8, plotT-10, c.yLabel, black)

	n := len(c.groups)
	if n == 0 || len(c.series) == 0 {
		return img
	}
	groupW := float64(plotR-plotL) / float64(n)
	barW := groupW * 0.8 / float64(len(c.series))
	for g, name := range c.groups {
		x0 := float64(plotL) + groupW*float64(g) + groupW*0.1
		for s := range c.series {
			v := c.values[g][s]
			if math.IsNaN(v) {
				continue
			}
			top := plotB - int(ax.frac(v)*float64(plotB-plotT))
			bx := int(x0 + barW*float64(s))
			fill(img, image.Rect(bx+1, top, int(x0+barW*float64(s+1))-1, plotB), palette[s%len(palette)])
			if barW >= 7*float64(len(short(v)))-6 {
				text(img, bx+1, top-3, short(v), black)
			}
		}
		text(img, int(x0), plotB+16, name, black)
	}
	// Legend under the axis.
	lx, ly := plotL, plotB+40
	for s, name := range c.series {
		w := 18 + 7*len(name) + 16
		if lx+w > chartW-marginR {
			lx, ly = plotL, ly+18
		}
		fill(img, image.Rect(lx, ly-10, lx+12, ly+2), palette[s%len(palette)])
		text(img, lx+16, ly, name, black)
		lx += w
	}
	return img
}

func (c *chart) writePNG(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.render()); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color) { fill(img, image.Rect(x0, y, x1, y+1), c) }
func vline(img *image.RGBA, x, y0, y1 int, c color.Color) { fill(img, image.Rect(x, y0, x+1, y1), c) }

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := &font.Drawer{Dst: img, Src: &image.Uniform{c}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// throughputChart plots msg/s of the open-throttle and keyed workloads.
func throughputChart(es []entry) *chart {
	return build(es, func(w string) bool { return w == "w2" || w == "w4" || w == "1p1c" || w == "4p4c" || w == "keyed" },
		"Throughput, msg/s (distinct messages delivered per second; higher is better)", "msg/s", false,
		func(e entry) []float64 { return []float64{e.R.MsgPerSec} }, nil)
}

// latencyChart plots p50, p99 and p99.9 of the fixed-rate workloads on a log scale.
func latencyChart(es []entry) *chart {
	return build(es, func(w string) bool { return w == "lat5k" || w == "rate1000" || w == "rate5000" },
		"Send-to-receive latency at a fixed offered rate, ms, log scale (p50 / p99 / p99.9; lower is better)", "ms", true,
		func(e entry) []float64 { return []float64{e.R.Latency.P50, e.R.Latency.P99, e.R.Latency.P999} },
		[]string{"p50", "p99", "p99.9"})
}

// build makes a chart with one group per (workload, sub-value) and one
// series per broker series, from the entries whose workload keep accepts.
func build(es []entry, keep func(string) bool, title, yLabel string, log bool,
	vals func(entry) []float64, subs []string) *chart {
	c := &chart{title: title, yLabel: yLabel, log: log}
	sidx := map[string]int{}
	gidx := map[string]int{}
	for _, e := range es {
		if !keep(e.Workload) {
			continue
		}
		if _, ok := sidx[e.Series]; !ok {
			sidx[e.Series] = len(c.series)
			c.series = append(c.series, e.Series)
		}
	}
	for _, e := range es {
		if !keep(e.Workload) {
			continue
		}
		vs := vals(e)
		for i, v := range vs {
			g := e.Workload
			if subs != nil {
				g += " " + subs[i]
			}
			gi, ok := gidx[g]
			if !ok {
				gi = len(c.groups)
				gidx[g] = gi
				c.groups = append(c.groups, g)
				row := make([]float64, len(c.series))
				for j := range row {
					row[j] = math.NaN()
				}
				c.values = append(c.values, row)
			}
			c.values[gi][sidx[e.Series]] = v
		}
	}
	if len(c.groups) == 0 {
		return nil
	}
	return c
}
