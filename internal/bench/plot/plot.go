// Package plot draws the evaluation suite's figures (PNG and SVG, through gonum.org/v1/plot)
// and renders the same data as Markdown tables, so that every number in a figure can also be
// read exactly.
package plot

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure is one chart.
type Figure struct {
	Name           string // file base name, e.g. "throughput-uplink" (files Name+".png" and Name+".svg")
	Title          string
	XLabel, YLabel string
	LogX, LogY     bool
	// Categories, when set, makes a grouped bar chart: X of each point is the index into Categories.
	Categories []string
	Series     []Series
	// Note is printed under the table (e.g. machine, command).
	Note string
}

// Series is one line of a line chart, or one bar of each group of a bar chart.
type Series struct {
	Name   string
	Points []Point
	Dashed bool // reference lines (baselines), drawn dashed
}

// Point is one measurement.
type Point struct {
	X, Y float64
	// YErr, when > 0, draws a ± error bar (e.g. the spread of repetitions).
	YErr float64
}

// Canvas size: 600x375 pt is 800x500 px at pngDPI, the size the PNG is read at.
const (
	width  = 600
	height = 375
	pngDPI = 96
)

// palette is Okabe and Ito's colour-blind safe set, without its yellow, which is unreadable on
// white.
var palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	color.RGBA{0x00, 0x9e, 0x73, 0xff}, // bluish green
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
	color.RGBA{0xe6, 0x9f, 0x00, 0xff}, // orange
	color.RGBA{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
}

// shapes differ as well as colours, so that series stay apart in grey print; its length is
// prime to the palette's so that colour and shape pairs repeat as late as possible.
// Filled shapes come first: they stay visible under error bars.
var shapes = []draw.GlyphDrawer{
	draw.CircleGlyph{},
	draw.BoxGlyph{},
	draw.PyramidGlyph{},
	draw.RingGlyph{},
	draw.SquareGlyph{},
	draw.TriangleGlyph{},
	draw.CrossGlyph{},
	draw.PlusGlyph{},
}

var dashes = []vg.Length{vg.Points(6), vg.Points(3)}

// Draw writes dir/Name.png and dir/Name.svg.
func Draw(f Figure, dir string) error {
	if err := validate(f); err != nil {
		return err
	}
	png := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(pngDPI))}
	svg := vgsvg.New(width, height)
	for _, out := range []struct {
		ext string
		c   interface {
			vg.CanvasSizer
			io.WriterTo
		}
	}{{".png", png}, {".svg", svg}} {
		if err := render(f, draw.New(out.c)); err != nil {
			return fmt.Errorf("plot: figure %q: %w", f.Name, err)
		}
		if err := writeFile(filepath.Join(dir, f.Name+out.ext), out.c); err != nil {
			return fmt.Errorf("plot: figure %q: %w", f.Name, err)
		}
	}
	return nil
}

func writeFile(path string, w io.WriterTo) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(file); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// validate rejects what gonum would draw wrongly or panic on (NaN, non-positive values on a
// log axis), naming the figure and series so that a bad run is easy to find.
func validate(f Figure) error {
	if f.Name == "" || strings.ContainsAny(f.Name, `/\`) {
		return fmt.Errorf("plot: figure %q: name must be a non-empty file base name", f.Name)
	}
	if len(f.Series) == 0 {
		return fmt.Errorf("plot: figure %q: no series", f.Name)
	}
	if len(f.Categories) > 0 && (f.LogX || f.LogY) {
		return fmt.Errorf("plot: figure %q: bar charts have no log axes", f.Name)
	}
	points := 0
	for _, s := range f.Series {
		seen := map[float64]bool{}
		for i, p := range s.Points {
			if err := validatePoint(f, p, seen); err != nil {
				return fmt.Errorf("plot: figure %q: series %q: point %d (x=%g): %w", f.Name, s.Name, i, p.X, err)
			}
			seen[p.X] = true
		}
		points += len(s.Points)
	}
	if points == 0 {
		return fmt.Errorf("plot: figure %q: no points in any series", f.Name)
	}
	return nil
}

func validatePoint(f Figure, p Point, seen map[float64]bool) error {
	for _, v := range []struct {
		name string
		v    float64
	}{{"x", p.X}, {"y", p.Y}, {"y error", p.YErr}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) {
			return fmt.Errorf("%s is %v", v.name, v.v)
		}
	}
	switch {
	case p.YErr < 0:
		return fmt.Errorf("negative y error %g", p.YErr)
	case seen[p.X]:
		return errors.New("x repeated: a series has one value per x")
	case len(f.Categories) > 0 && (p.X != math.Trunc(p.X) || p.X < 0 || int(p.X) >= len(f.Categories)):
		return fmt.Errorf("x is not the index of one of the %d categories", len(f.Categories))
	case f.LogX && p.X <= 0:
		return errors.New("x is not positive on a log axis")
	case f.LogY && p.Y <= 0:
		return fmt.Errorf("y = %g is not positive on a log axis", p.Y)
	case f.LogY && p.Y-p.YErr <= 0:
		return fmt.Errorf("error bar reaches %g, not positive on a log axis", p.Y-p.YErr)
	}
	return nil
}

// render draws f on c: the plot on the left, the legend in a column on its right, so that the
// legend never hides data.
func render(f Figure, c draw.Canvas) error {
	// A margin, so that the title, axis label and legend do not touch the image's edge.
	margin := vg.Points(6)
	c = draw.Crop(c, margin, -margin, margin, -margin)
	p := gplot.New()
	p.Title.Text = f.Title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text, p.Y.Label.Text = f.XLabel, f.YLabel
	legend := gplot.NewLegend()
	legend.Left = true
	legend.Top = true
	legend.ThumbnailWidth = vg.Points(28)
	legend.Padding = vg.Points(4)
	for i, s := range f.Series {
		legend.Add(s.Name, thumbs(f, i)...)
	}
	gap := legend.TextStyle.Rectangle("  ").Max.X
	r := legend.Rectangle(c)
	plotArea := draw.Crop(c, 0, -(r.Max.X - r.Min.X + 2*gap), 0, 0)

	var err error
	if len(f.Categories) > 0 {
		err = addBars(p, f, plotArea)
	} else {
		err = addLines(p, f)
	}
	if err != nil {
		return err
	}
	p.Draw(plotArea)
	data := p.DataCanvas(plotArea)
	legend.Draw(draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: plotArea.Max.X + gap, Y: data.Min.Y},
		Max: vg.Point{X: c.Max.X, Y: data.Max.Y},
	}})
	return nil
}

func lineStyle(f Figure, i int) draw.LineStyle {
	ls := draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1.5)}
	if f.Series[i].Dashed {
		ls.Dashes = dashes
	}
	return ls
}

func glyphStyle(i int) draw.GlyphStyle {
	return draw.GlyphStyle{Color: palette[i%len(palette)], Radius: vg.Points(3), Shape: shapes[i%len(shapes)]}
}

// barStyle fills ordinary bars; a dashed (reference) series gets a pale fill and a dashed
// outline instead, as gonum has no hatching.
func barStyle(f Figure, i int) (fill color.Color, outline draw.LineStyle) {
	col := palette[i%len(palette)]
	if !f.Series[i].Dashed {
		return col, draw.LineStyle{}
	}
	r, g, b, _ := col.RGBA()
	pale := color.RGBA{lighten(r), lighten(g), lighten(b), 0xff}
	return pale, draw.LineStyle{Color: col, Width: vg.Points(1.5), Dashes: dashes}
}

// lighten mixes a 16-bit colour channel three parts white to one part colour, as an 8-bit one.
func lighten(c uint32) uint8 { return uint8((3*0xffff + c) / 4 >> 8) }

// thumbs are series i's legend icons, built from its style rather than its plotters so that
// a series without points still has its entry.
func thumbs(f Figure, i int) []gplot.Thumbnailer {
	if len(f.Categories) > 0 {
		fill, outline := barStyle(f, i)
		return []gplot.Thumbnailer{&plotter.BarChart{Color: fill, LineStyle: outline}}
	}
	return []gplot.Thumbnailer{&plotter.Line{LineStyle: lineStyle(f, i)}, &plotter.Scatter{GlyphStyle: glyphStyle(i)}}
}

func addLines(p *gplot.Plot, f Figure) error {
	p.Add(plotter.NewGrid())
	for i, s := range f.Series {
		pts := slices.Clone(s.Points)
		// Lines join points in X order whatever order the measurements came in.
		slices.SortFunc(pts, func(a, b Point) int { return cmp.Compare(a.X, b.X) })
		xys := make(plotter.XYs, len(pts))
		var errXYs plotter.XYs
		var errs plotter.YErrors
		for j, pt := range pts {
			xys[j] = plotter.XY{X: pt.X, Y: pt.Y}
			if pt.YErr > 0 {
				errXYs = append(errXYs, xys[j])
				errs = append(errs, plotter.YErrors{{Low: pt.YErr, High: pt.YErr}}...)
			}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.LineStyle = lineStyle(f, i)
		marks, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		marks.GlyphStyle = glyphStyle(i)
		p.Add(line, marks)
		if len(errs) > 0 {
			p.Add(&plotter.YErrorBars{XYs: errXYs, YErrors: errs,
				LineStyle: draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1)}, CapWidth: vg.Points(6)})
		}
	}
	setAxis(&p.X, f.LogX, false)
	setAxis(&p.Y, f.LogY, true)
	return nil
}

// setAxis picks scale and ticks; a linear value axis starts at 0 so that bar heights and line
// levels compare by eye.
func setAxis(a *gplot.Axis, log, fromZero bool) {
	if !log {
		a.Tick.Marker = linearTicks{}
		if fromZero {
			a.Min = math.Min(0, a.Min)
		}
		return
	}
	a.Scale = gplot.LogScale{}
	a.Tick.Marker = logTicks{}
	if a.Min == a.Max {
		// One value: gonum would widen the range by ±1, possibly to ≤ 0, where a log axis
		// cannot go.
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}

func addBars(p *gplot.Plot, f Figure, area draw.Canvas) error {
	p.Add(&plotter.Grid{Horizontal: plotter.DefaultGridLineStyle})
	p.NominalX(f.Categories...)
	p.X.Min, p.X.Max = -0.5, float64(len(f.Categories))-0.5
	p.Y.Min = 0
	for _, s := range f.Series {
		for _, pt := range s.Points {
			p.Y.Min = math.Min(p.Y.Min, pt.Y-pt.YErr)
			p.Y.Max = math.Max(p.Y.Max, pt.Y+pt.YErr)
		}
	}
	p.Y.Tick.Marker = linearTicks{}
	// Bar widths are lengths, not data units: measure the data area, which the bars do not
	// change as they stay inside the X range set above.
	data := p.DataCanvas(area)
	group := (data.Max.X - data.Min.X) / vg.Length(len(f.Categories)) * 0.8
	bar := group / vg.Length(len(f.Series))
	for i, s := range f.Series {
		fill, outline := barStyle(f, i)
		offset := -group/2 + bar*(vg.Length(i)+0.5)
		for _, pt := range s.Points {
			// One chart per bar, so that a series may miss a category.
			b, err := plotter.NewBarChart(plotter.Values{pt.Y}, bar)
			if err != nil {
				return err
			}
			b.XMin, b.Offset, b.Color, b.LineStyle = pt.X, offset, fill, outline
			p.Add(b)
			if pt.YErr > 0 {
				p.Add(shiftedErrorBars{&plotter.YErrorBars{
					XYs:       plotter.XYs{{X: pt.X, Y: pt.Y}},
					YErrors:   plotter.YErrors{{Low: pt.YErr, High: pt.YErr}},
					LineStyle: draw.LineStyle{Color: color.Black, Width: vg.Points(1)},
					CapWidth:  bar / 2,
				}, offset})
			}
		}
	}
	return nil
}

// shiftedErrorBars draws error bars dx to the right of their X, over their bar in a group
// (gonum offsets bars by a length, which YErrorBars cannot).
type shiftedErrorBars struct {
	*plotter.YErrorBars
	dx vg.Length
}

func (s shiftedErrorBars) Plot(c draw.Canvas, p *gplot.Plot) {
	c.Min.X += s.dx
	c.Max.X += s.dx
	s.YErrorBars.Plot(c, p)
}

// linearTicks labels about six round values, 1, 2 or 5 times a power of ten apart, as the
// tables write them (10k, 1.5M): gonum's default labels three, too few to read a height from.
type linearTicks struct{}

func (linearTicks) Ticks(lo, hi float64) []gplot.Tick {
	raw := (hi - lo) / 6
	pow := math.Pow10(int(math.Floor(math.Log10(raw))))
	step := 10 * pow
	for _, m := range []float64{1, 2, 5} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	var ticks []gplot.Tick
	// Multiples of step counted, not summed, so that rounding errors do not add up; the
	// tolerance keeps an end that is itself a multiple (0.3 = 3 × 0.1 in decimal only).
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+step*1e-9; i++ {
		ticks = append(ticks, gplot.Tick{Value: i * step, Label: compact(i * step)})
	}
	return ticks
}

// logTicks are gonum's log ticks, plus labels at 2 and 5 times each power of ten when the
// range spans so few decades that powers of ten alone would leave one label or none.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []gplot.Tick {
	ticks := gplot.LogTicks{}.Ticks(lo, hi)
	dense := math.Log10(hi/lo) < 2
	for i := range ticks {
		m := ticks[i].Value / math.Pow10(int(math.Floor(math.Log10(ticks[i].Value)+1e-9)))
		switch m = math.Round(m); {
		case m == 1, dense && (m == 2 || m == 5):
			ticks[i].Label = compact(ticks[i].Value)
		default:
			ticks[i].Label = ""
		}
	}
	return ticks
}
