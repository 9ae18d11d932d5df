// Command cudaep-bench measures cudaep against raw baselines, side by side in one run, and
// prints a table (ours | baseline | ratio) and writes the same figures as JSON.
//
// Usage:
//
//	cudaep-bench [-backend=auto|cuda|sim] [-quick] [-json=PATH] [-rows=REGEXP]
//	             [-repo=DIR] [-bin=DIR] [-python=PYTHON] [-repeats=N] [-tmp=DIR]
//	cudaep-bench -version | -help
//
// Every row is measured after a warm-up as the median of repeated samples (each sample the
// mean of many calls, steps or layers), with the min–max spread; the JSON keeps every sample.
// Our side goes through package ep (and, for paging, package paging directly); the baselines
// are the cudadrv wrappers alone in this process (purego, no ep), C programs calling the
// driver and cuBLAS directly and a C client of libcudaep.so (bench/baselines, compiled by
// bench/scripts/bench-gpu.sh into -bin), and PyTorch (bench/baselines/torch_graph_replay.py, when
// `import torch` works). The C and Python programs run before and after the Go rows and their
// samples are pooled, so drift during the run shows as spread rather than bias.
//
// On the simulated device (backend sim, or auto without a GPU) the run uses tiny sizes,
// finishes in seconds and says plainly that its timings are not performance numbers; only the
// in-process baselines run there.
//
// bench/README.md says what every row means and how to reproduce a committed result.
//
// Progress goes to stderr, a line as each case starts and ends. -version prints the version
// and -help (or -h, --help) the usage with every row ID, both on stdout.
//
// Exit status: 0 when every case ran (and for -version and -help), 1 when a case failed or the
// device could not be opened (the table and JSON still hold what was measured), 2 for bad flags.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/cudaep/cudaep/capi/abi"
	"github.com/cudaep/cudaep/ep"
)

// errVersion is what parseFlags returns for -version.
var errVersion = errors.New("version requested")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parsed command line.
type config struct {
	backend  string
	quick    bool
	jsonPath string
	rows     *regexp.Regexp
	repo     string        // repository root: ep/kernels/ptx and bench/baselines are read from it
	bin      string        // directory of the compiled C baselines
	python   string        // interpreter for the PyTorch script; "" skips it
	repeats  int           // samples per series; 0 means the default for the mode
	tmp      string        // where the paging benchmark writes its external-data files
	timeout  time.Duration // limit for each external program
	args     []string
	progress io.Writer
}

// parseFlags parses args into a config; progress goes to stderr, the flag package's usage and
// messages to out. It returns flag.ErrHelp for -help and errVersion for -version.
func parseFlags(args []string, stderr, out io.Writer) (config, error) {
	fs := flag.NewFlagSet("cudaep-bench", flag.ContinueOnError)
	fs.SetOutput(out)
	c := config{args: args, progress: stderr}
	version := fs.Bool("version", false, "print the version and exit")
	fs.StringVar(&c.backend, "backend", "auto", "device: cuda, sim, or auto (cuda when a GPU is usable, else sim)")
	fs.BoolVar(&c.quick, "quick", false, "tiny sizes and few repeats (smoke test; always on for sim)")
	fs.StringVar(&c.jsonPath, "json", "", "write the report as JSON to this path")
	rows := fs.String("rows", "", "run only the rows whose ID matches this regular expression (e.g. 'replay|enqueue')")
	fs.StringVar(&c.repo, "repo", ".", "repository root (for ep/kernels/ptx and bench/baselines)")
	fs.StringVar(&c.bin, "bin", "build/bench", "directory holding the compiled C baselines")
	fs.StringVar(&c.python, "python", "python3", "Python interpreter for the PyTorch baseline (empty: skip it)")
	fs.IntVar(&c.repeats, "repeats", 0, "samples per series (0: 15, or 5 with -quick)")
	fs.StringVar(&c.tmp, "tmp", os.TempDir(), "directory for the paging benchmark's weight files")
	fs.DurationVar(&c.timeout, "timeout", 150*time.Second, "time limit for each external baseline program")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: cudaep-bench [flags]\n\nRow IDs: %s\n\nFlags:\n", allRowIDsText())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *version {
		return c, errVersion
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch c.backend {
	case "auto", "cuda", "sim":
	default:
		return c, fmt.Errorf("-backend=%q: want auto, cuda or sim", c.backend)
	}
	if c.repeats < 0 {
		return c, fmt.Errorf("-repeats=%d: want 0 or more", c.repeats)
	}
	if c.timeout <= 0 {
		return c, fmt.Errorf("-timeout=%v: want a positive duration", c.timeout)
	}
	re, err := regexp.Compile(*rows)
	if err != nil {
		return c, fmt.Errorf("-rows: %w", err)
	}
	c.rows = re
	if !anyRowMatches(re) {
		return c, fmt.Errorf("-rows=%q matches no row; row IDs: %s", *rows, allRowIDsText())
	}
	return c, nil
}

// run is the whole program, with its arguments and output streams passed in for tests.
func run(args []string, stdout, stderr io.Writer) int {
	// The flag package prints the usage both for -help (wanted on stdout) and for a bad flag
	// (on stderr, with the error): collect it and decide.
	var usage bytes.Buffer
	cfg, err := parseFlags(args, stderr, &usage)
	switch {
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(usage.Bytes())
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "cudaep-bench %s (C ABI %d)\n", ep.Version, abi.Version)
		return 0
	case err != nil:
		stderr.Write(usage.Bytes())
		fmt.Fprintf(stderr, "cudaep-bench: %v\n", err)
		return 2
	}
	rep, err := runBench(cfg)
	code := 0
	if err != nil {
		fmt.Fprintf(stderr, "cudaep-bench: %v\n", err)
		code = 1
	}
	if rep == nil {
		return 1
	}
	if len(rep.Errors) > 0 {
		code = 1
	}
	if cfg.jsonPath != "" {
		if err := rep.SaveJSON(cfg.jsonPath); err != nil {
			fmt.Fprintf(stderr, "cudaep-bench: %v\n", err)
			code = 1
		} else {
			fmt.Fprintf(stderr, "cudaep-bench: wrote %s\n", cfg.jsonPath)
		}
	}
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "cudaep-bench: %v\n", err)
		return 1
	}
	return code
}
