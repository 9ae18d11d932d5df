package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Units of measures. Times are per operation (call, step, layer); rates are totals.
const (
	UnitMicros = "µs"
	UnitMillis = "ms"
	UnitTFLOPS = "TFLOP/s"
	UnitGBps   = "GB/s"
	UnitCount  = "count"
)

// Sources say where a measure was taken. Every source of one report ran on the same machine in
// the same run of the program.
const (
	SourceEP    = "go-ep"    // through package ep, in this process
	SourceGoRaw = "go-raw"   // the cudadrv wrappers alone, in this process (purego, no ep)
	SourceCRaw  = "c-raw"    // a C program calling the driver or cuBLAS directly
	SourceCABI  = "c-abi"    // a C program calling libcudaep.so through include/cudaep.h
	SourceTorch = "pytorch"  // a Python program using PyTorch
	SourcePage  = "go-pages" // package paging directly, in this process
)

// Measure is one measured series of a row: a label saying what was timed and how, the source,
// the unit and the summary of its samples — or, when it could not be measured in this run, a
// note saying why (for example "torch not importable") and no summary.
type Measure struct {
	Label   string   `json:"label"`
	Source  string   `json:"source"`
	Unit    string   `json:"unit"`
	Summary *Summary `json:"summary,omitempty"`
	Note    string   `json:"note,omitempty"`
	// Ratio is the row's ours median over this measure's median (set on baselines by
	// Report.finish; absent when either side is missing).
	Ratio *float64 `json:"ratio,omitempty"`
}

// Measured reports whether m has samples.
func (m Measure) Measured() bool { return m.Summary != nil && m.Summary.N > 0 }

// Goal is one of issue 8's targets for a row, and whether this run met it. Goals are reported,
// never asserted.
type Goal struct {
	Text string `json:"text"` // e.g. "≤ 1.03× raw C"
	// Met is nil when the goal could not be evaluated (a baseline missing, or a sim run).
	Met    *bool  `json:"met,omitempty"`
	Detail string `json:"detail"` // the numbers behind the verdict, or why there is none
}

// Row is one line of the table: our figure and its baselines, all measured in this run.
type Row struct {
	ID    string `json:"id"`    // stable key, e.g. "replay/4"; -rows matches it
	Group string `json:"group"` // e.g. "graph replay"
	Title string `json:"title"` // what the row measures, in words
	// HigherIsBetter is true for rates (TFLOP/s, GB/s).
	HigherIsBetter bool      `json:"higher_is_better"`
	Ours           Measure   `json:"ours"`
	Baselines      []Measure `json:"baselines"`
	Goal           *Goal     `json:"goal,omitempty"`
	// Derived are figures computed from the measures (paging: p_over_max_cx, link_efficiency…).
	Derived map[string]float64 `json:"derived,omitempty"`
	Notes   []string           `json:"notes,omitempty"`
}

// Baseline returns the row's baseline from source whose label is label ("" matches any label).
func (r *Row) Baseline(source, label string) (Measure, bool) {
	for _, b := range r.Baselines {
		if b.Source == source && (label == "" || b.Label == label) {
			return b, true
		}
	}
	return Measure{}, false
}

// DeviceInfo is the device a report ran on.
type DeviceInfo struct {
	Name            string `json:"name"`
	ComputeCap      string `json:"compute_capability"`
	Multiprocessors int    `json:"multiprocessors"`
	TotalMemory     uint64 `json:"total_memory_bytes"`
	// DriverVersion is the driver's encoding (1000·major + 10·minor), DriverVersionText "13.0".
	DriverVersion     int    `json:"driver_version"`
	DriverVersionText string `json:"driver_version_text"`
}

// Report is everything one run measured: the JSON file is this value.
type Report struct {
	Tool       string     `json:"tool"`
	EPVersion  string     `json:"ep_version"`
	Date       string     `json:"date"` // RFC 3339, UTC, when the run started
	Backend    string     `json:"backend"`
	AutoReason string     `json:"auto_reason,omitempty"`
	Device     DeviceInfo `json:"device"`
	GoVersion  string     `json:"go_version"`
	GOMAXPROCS int        `json:"gomaxprocs"`
	CPUs       int        `json:"cpus"`
	Quick      bool       `json:"quick"`
	Repeats    int        `json:"repeats"`
	Args       []string   `json:"args"`
	// SimNotice is set on the sim backend: its timings are not performance numbers.
	SimNotice string `json:"sim_notice,omitempty"`
	// Method describes how rows were timed, in words.
	Method []string `json:"method"`
	// External lists what the external baseline programs reported about themselves.
	External map[string]string `json:"external,omitempty"`
	Rows     []Row             `json:"rows"`
	// Errors are cases that failed; their rows are missing or carry notes.
	Errors []string `json:"errors,omitempty"`
}

// finish fills every baseline's ratio (ours median / baseline median). Call it once all rows
// are in.
func (r *Report) finish() {
	for i := range r.Rows {
		row := &r.Rows[i]
		for j := range row.Baselines {
			b := &row.Baselines[j]
			b.Ratio = nil
			if row.Ours.Measured() && b.Measured() && b.Summary.Median != 0 && b.Unit == row.Ours.Unit {
				v := row.Ours.Summary.Median / b.Summary.Median
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					b.Ratio = &v
				}
			}
		}
	}
}

// WriteJSON writes the report, indented, to w.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// SaveJSON writes the report to path, creating its directory, through a temporary file so that
// a failed run never leaves half a file behind.
func (r *Report) SaveJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cudaep-bench-*.json")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	werr := r.WriteJSON(tmp)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// measure builds a Measure from samples; a summary error becomes the measure's note.
func measure(label, source, unit string, samples []float64) Measure {
	m := Measure{Label: label, Source: source, Unit: unit}
	s, err := Summarize(samples)
	if err != nil {
		m.Note = "not measured: " + err.Error()
		return m
	}
	m.Summary = &s
	return m
}

// missing builds a Measure that could not be taken, with the reason.
func missing(label, source, unit, why string) Measure {
	return Measure{Label: label, Source: source, Unit: unit, Note: why}
}

func boolPtr(b bool) *bool { return &b }

// goalRatio is the goal "ours ≤ limit × base" for lower-is-better rows, or "ours ≥ limit ×
// base" for rates; evaluate is false on the simulated device.
func goalRatio(row *Row, base Measure, text string, limit float64, evaluate bool) *Goal {
	g := &Goal{Text: text}
	if why := goalBlocked(row, base, evaluate); why != "" {
		g.Detail = why
		return g
	}
	ratio := row.Ours.Summary.Median / base.Summary.Median
	if row.HigherIsBetter {
		g.Met = boolPtr(ratio >= limit)
	} else {
		g.Met = boolPtr(ratio <= limit)
	}
	g.Detail = fmt.Sprintf("ours/(%s) = %.3f, limit %.2f", base.Label, ratio, limit)
	return g
}

// goalMargin is the goal "ours ≤ base + margin", margin in the row's unit.
func goalMargin(row *Row, base Measure, text string, margin float64, evaluate bool) *Goal {
	g := &Goal{Text: text}
	if why := goalBlocked(row, base, evaluate); why != "" {
		g.Detail = why
		return g
	}
	diff := row.Ours.Summary.Median - base.Summary.Median
	g.Met = boolPtr(diff <= margin)
	g.Detail = fmt.Sprintf("ours − (%s) = %+.3f %s, limit +%.2f", base.Label, diff, row.Ours.Unit, margin)
	return g
}

// goalBlocked says why a goal cannot be evaluated, or "" when it can.
func goalBlocked(row *Row, base Measure, evaluate bool) string {
	switch {
	case !evaluate:
		return "not evaluated: timings of the simulated device are not performance numbers"
	case !row.Ours.Measured():
		return "not evaluated: ours was not measured"
	case !base.Measured():
		why := "not evaluated: " + base.Label + " was not measured"
		if base.Note != "" {
			why += " (" + base.Note + ")"
		}
		return why
	case base.Summary.Median == 0:
		return "not evaluated: the baseline's median is 0"
	}
	return ""
}
