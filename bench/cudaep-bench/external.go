package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The baseline programs (bench/baselines: the raw C driver and cuBLAS programs, the C ABI client,
// the PyTorch script) print their results in one line-oriented format, which this file
// parses:
//
//	sample KEY UNIT V1 V2 …   one series: every repeat's per-operation figure, in order
//	info KEY VALUE…           a fact about the run (device name, library versions)
//	skip KEY REASON…          a series the program could not measure, and why
//
// Blank lines and lines starting with '#' are comments; any other line is an error, so that a
// program that starts printing something else is noticed rather than half-read. A KEY holds
// no spaces; a program that runs twice (before and after the Go rows) has its samples of one
// KEY pooled.

// recordRest matches an info or skip line and captures its value: everything after the
// record word, the key and the blanks that follow them.
var recordRest = regexp.MustCompile(`^\S+\s+\S+\s+(.*)$`)

// Series is one external program's samples for one key.
type Series struct {
	Unit    string
	Samples []float64
}

// External is what the baseline programs of one run reported.
type External struct {
	Series map[string]*Series
	Info   map[string]string
	Skips  map[string]string
}

func newExternal() *External {
	return &External{Series: map[string]*Series{}, Info: map[string]string{}, Skips: map[string]string{}}
}

// Parse reads one program's output in the format above into e; prefix (e.g. "c.") is put in
// front of every key. It returns the first malformed line as an error naming its number.
func (e *External) Parse(r io.Reader, prefix string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		switch fields[0] {
		case "sample":
			if len(fields) < 4 {
				return fmt.Errorf("line %d: want \"sample KEY UNIT V…\", got %q", n, line)
			}
			key, unit := prefix+fields[1], fields[2]
			if unit == "us" { // ASCII spelling of µs, for C and Python
				unit = UnitMicros
			}
			s := e.Series[key]
			if s == nil {
				s = &Series{Unit: unit}
				e.Series[key] = s
			} else if s.Unit != unit {
				return fmt.Errorf("line %d: %s in %s, earlier in %s", n, key, unit, s.Unit)
			}
			for _, f := range fields[3:] {
				v, err := strconv.ParseFloat(f, 64)
				if err != nil {
					return fmt.Errorf("line %d: %s: sample %q is not a number", n, key, f)
				}
				s.Samples = append(s.Samples, v)
			}
		case "info", "skip":
			if len(fields) < 3 {
				return fmt.Errorf("line %d: want \"%s KEY VALUE…\", got %q", n, fields[0], line)
			}
			rest := recordRest.FindStringSubmatch(line)[1]
			if fields[0] == "info" {
				e.Info[prefix+fields[1]] = rest
			} else {
				e.Skips[prefix+fields[1]] = rest
			}
		default:
			return fmt.Errorf("line %d: unknown record %q (want sample, info or skip)", n, fields[0])
		}
	}
	return sc.Err()
}

// Measure returns the series key as a Measure labelled label, or a Measure whose note says
// why it is missing: the program's skip reason, or why the program did not run (absent).
func (e *External) Measure(key, label, source, unit, absent string) Measure {
	if s, ok := e.Series[key]; ok {
		if s.Unit != unit {
			return missing(label, source, unit, fmt.Sprintf("%s reported %s, not %s", key, s.Unit, unit))
		}
		return measure(label, source, unit, s.Samples)
	}
	if why, ok := e.Skips[key]; ok {
		return missing(label, source, unit, why)
	}
	return missing(label, source, unit, absent)
}

// runProgram runs argv with a timeout and returns its standard output. Standard error is
// passed through to stderr (progress and diagnostics). A failure names the program, its exit
// status and the last lines it wrote to standard error.
func runProgram(argv []string, timeout time.Duration, env []string, stderr io.Writer) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var out, errBuf bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(stderr, &tailWriter{buf: &errBuf, max: 4 << 10})
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return out.Bytes(), fmt.Errorf("%s: timed out after %v", argv[0], timeout)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.Bytes(), fmt.Errorf("%s: %v: %s", argv[0], err, strings.TrimSpace(errBuf.String()))
		}
		return out.Bytes(), fmt.Errorf("%s: %w", argv[0], err)
	}
	return out.Bytes(), nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	buf *bytes.Buffer
	max int
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}
