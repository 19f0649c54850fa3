package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Figures shaped like the suite's: a line chart, a log-log chart with a dashed reference,
// and a grouped bar chart where one series misses a category.
var (
	lineFig = Figure{
		Name: "line", Title: "Throughput against sessions", XLabel: "sessions", YLabel: "Mpps",
		Series: []Series{
			{Name: "uplink", Points: []Point{{1, 9.1, 0.2}, {1000, 8.7, 0.1}, {100000, 7.2, 0.3}}},
			{Name: "downlink", Points: []Point{{1, 10.2, 0}, {1000, 9.9, 0}, {100000, 8, 0}}},
		},
	}
	logFig = Figure{
		Name: "loglog", Title: "QER MBR precision", XLabel: "MBR (bit/s)", YLabel: "delivered (bit/s)",
		LogX: true, LogY: true,
		Series: []Series{
			{Name: "token bucket", Points: []Point{{1e6, 0.98e6, 0.01e6}, {1e8, 0.99e8, 0}, {1e10, 0.97e10, 0}}},
			{Name: "MBR", Dashed: true, Points: []Point{{1e6, 1e6, 0}, {1e8, 1e8, 0}, {1e10, 1e10, 0}}},
		},
	}
	barFig = Figure{
		Name: "bars", Title: "Throughput, uplink", YLabel: "Mpps",
		Categories: []string{"64 B", "512 B", "1518 B"},
		Series: []Series{
			{Name: "xupf, 1 CPU", Points: []Point{{0, 3.1, 0.1}, {1, 2.9, 0.05}, {2, 0.8, 0}}},
			{Name: "XDP forwarder", Dashed: true, Points: []Point{{0, 5.2, 0}, {2, 0.81, 0}}},
		},
	}
)

func TestDraw(t *testing.T) {
	// A series left without points (say, every trial failed) keeps its legend entry.
	withEmpty := func(f Figure) Figure {
		f.Name += "-empty-series"
		f.Series = append(slices.Clone(f.Series), Series{Name: "failed"})
		return f
	}
	for _, f := range []Figure{lineFig, logFig, barFig, withEmpty(lineFig), withEmpty(barFig)} {
		t.Run(f.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Draw(f, dir); err != nil {
				t.Fatal(err)
			}
			png, err := os.ReadFile(filepath.Join(dir, f.Name+".png"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
				t.Errorf("%s.png: no PNG signature (%d bytes)", f.Name, len(png))
			}
			svg, err := os.ReadFile(filepath.Join(dir, f.Name+".svg"))
			if err != nil {
				t.Fatal(err)
			}
			if root, err := xmlRoot(svg); err != nil || root != "svg" {
				t.Errorf("%s.svg: root element %q, error %v; want svg", f.Name, root, err)
			}
		})
	}
}

// xmlRoot parses the whole document and returns its root element's name.
func xmlRoot(b []byte) (string, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return root, nil
		}
		if err != nil {
			return root, err
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
}

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Figure
		want string
	}{{
		name: "numeric X, SI formatting, missing point, note",
		f: Figure{
			XLabel: "offered (pps)",
			Series: []Series{
				{Name: "a|b", Points: []Point{{1.5e9, 123456, 1500}, {100000, 2, 0}}},
				{Name: "ref", Points: []Point{{1e6, 0.5, 0}, {100000, 999999, 0}}},
			},
			Note: "Machine: test.",
		},
		want: "| offered (pps) | a\\|b | ref |\n" +
			"|--:|--:|--:|\n" +
			"| 100k | 2 | 1M |\n" +
			"| 1M |  | 0.5 |\n" +
			"| 1.5G | 123.5k ± 1500 |  |\n" +
			"\nMachine: test.\n",
	}, {
		name: "categories",
		f:    barFig,
		want: "|  | xupf, 1 CPU | XDP forwarder |\n" +
			"|---|--:|--:|\n" +
			"| 64 B | 3.1 ± 0.1 | 5.2 |\n" +
			"| 512 B | 2.9 ± 0.05 |  |\n" +
			"| 1518 B | 0.8 | 0.81 |\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Table(tc.f); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestDrawRejects(t *testing.T) {
	with := func(f Figure, edit func(*Figure)) Figure {
		f.Series = append([]Series(nil), f.Series...)
		for i := range f.Series {
			f.Series[i].Points = append([]Point(nil), f.Series[i].Points...)
		}
		edit(&f)
		return f
	}
	for _, tc := range []struct {
		name string
		f    Figure
		want string // in the error, besides the figure's name
	}{
		{"no series", with(lineFig, func(f *Figure) { f.Series = nil }), "no series"},
		{"no points", with(lineFig, func(f *Figure) { f.Series = []Series{{Name: "empty"}} }), "no points"},
		{"NaN", with(lineFig, func(f *Figure) { f.Series[1].Points[2].Y = math.NaN() }), `series "downlink": point 2 (x=100000): y is NaN`},
		{"Inf", with(lineFig, func(f *Figure) { f.Series[0].Points[0].X = math.Inf(1) }), `series "uplink": point 0 (x=+Inf): x is +Inf`},
		{"zero on log X", with(logFig, func(f *Figure) { f.Series[1].Points[0].X = 0 }), `series "MBR": point 0 (x=0): x is not positive on a log axis`},
		{"negative on log Y", with(logFig, func(f *Figure) { f.Series[0].Points[1].Y = -1 }), `series "token bucket": point 1 (x=1e+08): y = -1 is not positive on a log axis`},
		{"error bar below 0 on log Y", with(logFig, func(f *Figure) { f.Series[0].Points[0].YErr = 2e6 }), `series "token bucket": point 0 (x=1e+06): error bar reaches -1.02e+06`},
		{"category out of range", with(barFig, func(f *Figure) { f.Series[1].Points[1].X = 3 }), `series "XDP forwarder": point 1 (x=3): x is not the index`},
		{"repeated X", with(lineFig, func(f *Figure) { f.Series[0].Points[1].X = 1 }), `series "uplink": point 1 (x=1): x repeated`},
		{"log bar chart", with(barFig, func(f *Figure) { f.LogY = true }), "bar charts have no log axes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := Draw(tc.f, dir)
			if err == nil {
				t.Fatalf("Draw accepted it")
			}
			if msg := err.Error(); !strings.Contains(msg, `figure "`+tc.f.Name+`"`) || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q: want the figure's name and %q", msg, tc.want)
			}
			if files, _ := os.ReadDir(dir); len(files) > 0 {
				t.Errorf("Draw wrote %d files for a rejected figure", len(files))
			}
		})
	}
}
