package main

import (
	"fmt"
	"io"
	"os"
)

// progressFunc is told how far a phase of the run got: done of total items (layers written,
// layers prefilled, tokens decoded). phase names the phase and its items ("prefill: layer").
type progressFunc func(phase string, done, total int)

// The values of -progress: how the demo reports its phases on stderr.
const (
	progressAuto  = "auto"  // one overwritten line on a terminal; phase lines elsewhere, for long runs
	progressLines = "lines" // phase lines, whatever stderr is
	progressOff   = "off"   // nothing
)

// longRunMACs is the size, in multiply-adds of the run's GEMMs (layers × width² × (prefill rows +
// decode tokens)), above which -progress=auto prints phase lines when stderr is not a terminal:
// a run the simulator takes minutes over (the H200 sizes, 8 × 2048² × 192, are 6.4e9) says
// what it is doing, while `make demo`'s default sizes (1.3e8) print nothing but the report.
const longRunMACs = 1e9

// longRun reports whether cfg is a long run in the sense of longRunMACs.
func longRun(cfg config) bool {
	return float64(cfg.layers)*float64(cfg.width)*float64(cfg.width)*float64(cfg.prefill+cfg.tokens) >= longRunMACs
}

// newProgress returns the progress function for -progress=mode and a function that ends its
// output (clearing an overwritten line). stderr is where it writes; terminal says whether
// stderr is a terminal.
func newProgress(mode string, cfg config, stderr io.Writer, terminal bool) (progressFunc, func()) {
	switch {
	case mode == progressOff:
	case mode == progressAuto && terminal:
		return func(phase string, done, total int) {
			fmt.Fprintf(stderr, "\r\033[K  %s %d/%d", phase, done, total)
		}, func() { fmt.Fprint(stderr, "\r\033[K") }
	case mode == progressLines || longRun(cfg):
		l := &phaseLines{w: stderr}
		return l.report, func() {}
	}
	return func(string, int, int) {}, func() {}
}

// phaseLines prints a line when a phase starts (or starts again, as the second prefill does),
// at every eighth of its items and at its last item: at most about ten lines a phase, so a log
// shows a long run moving without drowning the report.
type phaseLines struct {
	w     io.Writer
	phase string
	last  int
}

func (l *phaseLines) report(phase string, done, total int) {
	step := max(1, total/8)
	if phase != l.phase || done < l.last || done == total || done%step == 0 {
		fmt.Fprintf(l.w, "cudaep-demo: %s %d/%d\n", phase, done, total)
	}
	l.phase, l.last = phase, done
}

// isTerminal reports whether f is a terminal, where progress lines may overwrite each other.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
