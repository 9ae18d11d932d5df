package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// GroupPaging is the group of the paging rows, which print as a table of their own.
const GroupPaging = "paging"

// fmtValue formats v in unit with a precision that suits its size.
func fmtValue(v float64, unit string) string {
	switch unit {
	case UnitCount:
		return fmt.Sprintf("%.0f", v)
	case UnitMicros:
		switch a := math.Abs(v); {
		case a >= 10000:
			return fmt.Sprintf("%.0f µs", v)
		case a >= 100:
			return fmt.Sprintf("%.1f µs", v)
		default:
			return fmt.Sprintf("%.2f µs", v)
		}
	case UnitMillis:
		return fmt.Sprintf("%.3f ms", v)
	default:
		switch a := math.Abs(v); {
		case a >= 100:
			return fmt.Sprintf("%.0f %s", v, unit)
		case a >= 1 || a == 0:
			return fmt.Sprintf("%.2f %s", v, unit)
		default:
			return fmt.Sprintf("%.3g %s", v, unit)
		}
	}
}

// fmtBare formats v like fmtValue without the unit, for spreads.
func fmtBare(v float64, unit string) string {
	s := fmtValue(v, unit)
	if unit == UnitCount {
		return s
	}
	return strings.TrimSuffix(s, " "+unit)
}

// fmtMeasure formats a measure's median and its min–max spread, or "—" when it was not
// measured (the reason prints under the table).
func fmtMeasure(m Measure) string {
	if !m.Measured() {
		return "—"
	}
	s := m.Summary
	if s.N == 1 || s.Min == s.Max {
		return fmtValue(s.Median, m.Unit)
	}
	return fmt.Sprintf("%s [%s–%s]", fmtValue(s.Median, m.Unit), fmtBare(s.Min, m.Unit), fmtBare(s.Max, m.Unit))
}

// fmtGoal formats a goal verdict for the table.
func fmtGoal(g *Goal) string {
	if g == nil {
		return ""
	}
	switch {
	case g.Met == nil:
		return g.Text + ": n/a"
	case *g.Met:
		return g.Text + ": met"
	default:
		return g.Text + ": MISSED"
	}
}

// WriteTable prints the report for a terminal: a banner, the main table (one line per
// baseline, ratio = ours/baseline), the paging table and the goals' details.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cudaep-bench %s · backend %s · %s", r.EPVersion, r.Backend, r.Device.Name)
	if r.Device.ComputeCap != "" {
		fmt.Fprintf(&b, " (sm_%s, %d SMs)", strings.ReplaceAll(r.Device.ComputeCap, ".", ""), r.Device.Multiprocessors)
	}
	fmt.Fprintf(&b, " · driver %s · %s\n", r.Device.DriverVersionText, r.Date)
	if r.SimNotice != "" {
		fmt.Fprintf(&b, "*** %s ***\n", r.SimNotice)
	}
	if r.AutoReason != "" {
		fmt.Fprintf(&b, "%s\n", r.AutoReason)
	}
	fmt.Fprintf(&b, "medians of %d repeats after warm-up, [min–max]; ratio = ours / baseline (for rates, >1 means ours is faster)\n\n", r.Repeats)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tours\tbaseline\tbaseline value\tratio\tgoal\t")
	var paging []Row
	for _, row := range r.Rows {
		if row.Group == GroupPaging {
			paging = append(paging, row)
			continue
		}
		lines := max(1, len(row.Baselines))
		for i := range lines {
			first, ours, goal := "", "", ""
			if i == 0 {
				first, ours, goal = row.Title, fmtMeasure(row.Ours), fmtGoal(row.Goal)
			}
			label, value, ratio := "", "", ""
			if i < len(row.Baselines) {
				bl := row.Baselines[i]
				label, value = bl.Label, fmtMeasure(bl)
				if bl.Ratio != nil {
					ratio = fmt.Sprintf("%.3f", *bl.Ratio)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", first, ours, label, value, ratio, goal)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(paging) > 0 {
		writePagingTable(&b, paging)
	}
	var details []string
	unjudged := 0
	for _, row := range r.Rows {
		if row.Goal == nil {
			continue
		}
		if r.SimNotice != "" && row.Goal.Met == nil {
			unjudged++ // on the simulator, timing goals are not evaluated: one line says so
			continue
		}
		details = append(details, fmt.Sprintf("  %-28s %s — %s", row.ID, fmtGoal(row.Goal), row.Goal.Detail))
	}
	if unjudged > 0 {
		details = append(details, fmt.Sprintf("  %d more goals not evaluated on the simulated device (the JSON says why for each)", unjudged))
	}
	if len(details) > 0 {
		b.WriteString("\ngoals (issues 8, 15 and 16; reported, never asserted):\n")
		b.WriteString(strings.Join(details, "\n"))
		b.WriteString("\n")
	}
	writeMissing(&b, r.Rows)
	for _, row := range r.Rows {
		for _, n := range row.Notes {
			fmt.Fprintf(&b, "note %s: %s\n", row.ID, n)
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	if r.SimNotice != "" {
		fmt.Fprintf(&b, "*** %s ***\n", r.SimNotice)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writePagingTable prints the paging rows: per layer size and transfer path, the four arms in
// ms per layer and the derived ratios.
func writePagingTable(b *strings.Builder, rows []Row) {
	b.WriteString("\npaging: ms per layer (medians), P pipelined two-slot, S serial one-slot, C compute proxy alone, X copy path alone;\n")
	b.WriteString("ideal = the least P/max(C,X) of a perfect L-layer pipeline, 1 + min(C,X)/(L·max(C,X)) (the first copy and the last compute cannot overlap);\n")
	b.WriteString("link eff = raw H2D ms / X ms; 1st pass = the same for the warm-up run (zero-copy: the run that registers the file's extents)\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layer\tpath\traw H2D GB/s\tC ms\tX ms\tS ms\tP ms\tP/max(C,X)\tideal\tP/ideal\tS/(C+X)\tlink eff\t1st pass\tgoals\t")
	arm := func(row Row, label string) string {
		if label == "P" {
			return fmtBare(row.Ours.Summary.Median, UnitMillis)
		}
		if m, ok := row.Baseline(SourcePage, label); ok && m.Measured() {
			return fmtBare(m.Summary.Median, UnitMillis)
		}
		return "—"
	}
	for _, row := range rows {
		d := row.Derived
		if !row.Ours.Measured() {
			fmt.Fprintf(tw, "%s\t%s\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\t—\t%s\t\n", sizeLabel(uint64(d["layer_bytes"])), pagingPathOf(row), strings.Join(row.Notes, "; "))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t\n",
			sizeLabel(uint64(d["layer_bytes"])), pagingPathOf(row), d["raw_h2d_gbps"],
			arm(row, "C"), arm(row, "X"), arm(row, "S"), arm(row, "P"),
			d["p_over_max_cx"], d["p_ideal_over_max_cx"], d["p_over_ideal"], d["s_over_c_plus_x"], d["link_efficiency"],
			d["first_pass_link_efficiency"], pagingGoals(row))
	}
	tw.Flush()
}

// pagingPathOf returns the transfer path named in a paging row's ID (paging/PATH/SIZE).
func pagingPathOf(row Row) string {
	parts := strings.Split(row.ID, "/")
	if len(parts) >= 2 {
		return parts[1]
	}
	return "?"
}

// pagingGoals formats the verdict of a paging row's goal (see pagingGoal); the details print
// under the tables.
func pagingGoals(row Row) string {
	if row.Goal == nil {
		return ""
	}
	switch {
	case row.Goal.Met == nil:
		return "n/a"
	case *row.Goal.Met:
		return "met"
	default:
		return "MISSED"
	}
}

// sizeLabel names a byte count in KiB, MiB or GiB.
func sizeLabel(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// writeMissing lists the measures that were not taken, once per label and reason, with the
// rows they belong to.
func writeMissing(b *strings.Builder, rows []Row) {
	type key struct{ label, why string }
	var order []key
	ids := map[key][]string{}
	for _, row := range rows {
		for _, m := range append([]Measure{row.Ours}, row.Baselines...) {
			if m.Measured() {
				continue
			}
			k := key{m.Label, m.Note}
			if _, ok := ids[k]; !ok {
				order = append(order, k)
			}
			ids[k] = append(ids[k], row.ID)
		}
	}
	if len(order) == 0 {
		return
	}
	b.WriteString("\nnot measured in this run (—):\n")
	for _, k := range order {
		why := k.why
		if why == "" {
			why = "no reason recorded"
		}
		fmt.Fprintf(b, "  %s [%s]: %s\n", k.label, strings.Join(ids[k], " "), why)
	}
}
