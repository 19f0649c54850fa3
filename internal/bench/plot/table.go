package plot

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// Table renders the figure's data as a GitHub Markdown table: one row per X (category name for
// bar charts, X formatted compactly otherwise), one column per series, "y ± error" in each cell
// and an empty cell where a series has no point at that X; then Note, if any.
func Table(f Figure) string {
	var xs []float64
	cells := make([]map[float64]string, len(f.Series))
	for i, s := range f.Series {
		cells[i] = map[float64]string{}
		for _, p := range s.Points {
			if _, ok := cells[i][p.X]; !ok {
				xs = append(xs, p.X)
			}
			c := compact(p.Y)
			if p.YErr > 0 {
				c += " ± " + compact(p.YErr)
			}
			cells[i][p.X] = c
		}
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)

	var b strings.Builder
	b.WriteString("| " + escape(f.XLabel) + " |")
	for _, s := range f.Series {
		b.WriteString(" " + escape(s.Name) + " |")
	}
	// Numbers align right; category names read better left.
	if len(f.Categories) > 0 {
		b.WriteString("\n|---|")
	} else {
		b.WriteString("\n|--:|")
	}
	b.WriteString(strings.Repeat("--:|", len(f.Series)) + "\n")
	for _, x := range xs {
		b.WriteString("| " + escape(xName(f, x)) + " |")
		for i := range f.Series {
			b.WriteString(" " + cells[i][x] + " |")
		}
		b.WriteString("\n")
	}
	if f.Note != "" {
		b.WriteString("\n" + f.Note + "\n")
	}
	return b.String()
}

func xName(f Figure, x float64) string {
	if i := int(x); float64(i) == x && i >= 0 && i < len(f.Categories) {
		return f.Categories[i]
	}
	return compact(x)
}

// escape keeps a name's "|" from splitting its cell.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// compact formats v with four significant digits, with an SI suffix from 10 000 up: frame
// sizes (64, 1518) read as themselves, rates stay short (100k, 1.5G).
func compact(v float64) string {
	// Round first, so that 999 999 becomes 1M rather than 1000k.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	if r == 0 {
		r = 0 // not "-0", which tick arithmetic can produce
	}
	if math.Abs(r) >= 1e4 {
		for _, u := range []struct {
			scale  float64
			suffix string
		}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
			if math.Abs(r) >= u.scale {
				return strconv.FormatFloat(r/u.scale, 'g', 4, 64) + u.suffix
			}
		}
	}
	return strconv.FormatFloat(r, 'g', 4, 64)
}
