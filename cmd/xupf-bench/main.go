// Command xupf-bench is xupf's evaluation suite: it measures the datapath against scenario
// files (see docs/bench.md), writing a result file per point, and draws the plots and
// tables of docs/benchmarks.md from the results.
//
//	xupf-bench run [--out DIR] [--xupfd PATH] SCENARIO.yaml...   (as root)
//	xupf-bench report [--doc docs/benchmarks.md] DIR
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/xupf/xupf/internal/bench/report"
	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/run"
	"github.com/xupf/xupf/internal/bench/scenario"
)

const usage = `usage:
  xupf-bench run [--out DIR] [--xupfd PATH] [--daemon-log] SCENARIO.yaml...
      measure every point of each scenario (needs root); results go to DIR/<scenario>/
  xupf-bench report [--doc FILE] [--command TEXT] DIR
      draw the plots (PNG and SVG, in benchmarks/ beside FILE) and write FILE
      (default docs/benchmarks.md) from the results in DIR
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(ctx, os.Args[2:])
	case "report":
		err = reportCmd(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xupf-bench:", err)
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a command line that cannot be run.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	out := fs.String("out", "bench-results", "directory for the result files")
	xupfd := fs.String("xupfd", "", "the xupfd binary (default: next to xupf-bench, else in PATH)")
	daemonLog := fs.Bool("daemon-log", false, "copy xupfd's output to standard error")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() == 0 {
		return usageError{"run: give one or more scenario files"}
	}
	if os.Geteuid() != 0 {
		return errors.New("run: needs root (network namespaces, XDP, BPF); run it with sudo")
	}
	bin, err := findXupfd(*xupfd)
	if err != nil {
		return err
	}
	// Every file is checked before anything is measured: a typo in the last one should not
	// cost the time of the first ones.
	var scs []*scenario.Scenario
	for _, path := range fs.Args() {
		sc, err := scenario.Load(path)
		if err != nil {
			return err
		}
		scs = append(scs, sc)
	}
	opts := run.Options{Xupfd: bin, Out: *out, Log: os.Stdout}
	if *daemonLog {
		opts.DaemonLog = os.Stderr
	}
	for _, sc := range scs {
		paths, err := run.Run(ctx, sc, opts)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %d result files in %s\n", sc.Name, len(paths), filepath.Join(*out, sc.Name))
	}
	return nil
}

// findXupfd resolves the xupfd binary: the flag, else next to this program, else in PATH.
func findXupfd(flagValue string) (string, error) {
	if flagValue != "" {
		if _, err := os.Stat(flagValue); err != nil {
			return "", fmt.Errorf("run: --xupfd: %w", err)
		}
		return flagValue, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "xupfd")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("xupfd"); err == nil {
		return p, nil
	}
	return "", errors.New("run: xupfd not found next to xupf-bench or in PATH; run `make build` (binaries in bin/) or pass --xupfd")
}

func reportCmd(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	doc := fs.String("doc", "docs/benchmarks.md", "the Markdown file to write; plots go to benchmarks/ beside it")
	command := fs.String("command", "", "how the results were produced, quoted in the report")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() != 1 {
		return usageError{"report: give the results directory"}
	}
	dir := fs.Arg(0)
	rs, err := result.ReadDir(dir)
	if err != nil {
		return err
	}
	if err := report.Write(report.Input{Results: rs, Command: *command}, *doc); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d results)\n", *doc, len(rs))
	return nil
}
