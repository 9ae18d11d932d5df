package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// write prints the end-to-end results as a compact table.
func (r results) write(w io.Writer, cfg config) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\n%d-layer MLP, width %d: prefill %d rows, decode %d tokens\n", cfg.layers, cfg.width, cfg.prefill, cfg.tokens)
	state := "reused"
	if r.wroteWeights {
		state = "written now"
	}
	fmt.Fprintf(tw, "  weights\t%s (%.1f MiB, %s)\n", r.weightsPath, float64(r.weightsBytes)/(1<<20), state)
	if r.registeredAtOpen {
		reg := fmt.Sprintf("registered %.1f MiB with the driver in %s", float64(r.registered.Bytes)/(1<<20), ms(r.registered.Took))
		if r.registered.Stopped != "" {
			reg += " (stopped: " + r.registered.Stopped + ")"
		}
		fmt.Fprintf(tw, "  external data open\t%s (%s)\n", ms(r.openTime), reg)
	} else {
		fmt.Fprintf(tw, "  external data open\t%s (not registered when opened)\n", ms(r.openTime))
	}
	fmt.Fprintf(tw, "  raw pinned H2D\t%.2f GB/s (one layer's size, %d copies, same run)\n", r.rawGBps, cfg.layers)
	for pass, name := range []string{"prefill (first)", "prefill (second)"} {
		gbps := 0.0
		if t := r.prefillTime[pass]; t > 0 {
			gbps = float64(r.prefillBytes[pass]) / t.Seconds() / 1e9
		}
		link, whole := "", ""
		if r.rawGBps > 0 {
			link = fmt.Sprintf(" = %.2f of raw pinned H2D", gbps/r.rawGBps)
			if t := r.prefillTime[pass] + r.readTime[pass]; t > 0 {
				whole = fmt.Sprintf(", %.2f with it", float64(r.prefillBytes[pass])/t.Seconds()/1e9/r.rawGBps)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s, %.2f GB/s paged%s (then %s reading the output into pinned memory%s)\n", name,
			ms(r.prefillTime[pass]), gbps, link, ms(r.readTime[pass]), whole)
	}
	fmt.Fprintf(tw, "  prefill output\tmax rel err %.2g (%d rows checked, both prefills)\n", r.prefillErr, r.prefillChecked)
	if r.pagingAlone > 0 && r.computeAlone > 0 {
		alone := ""
		if r.rawGBps > 0 {
			alone = fmt.Sprintf(", %.2f of raw", float64(r.prefillBytes[1])/r.pagingAlone.Seconds()/1e9/r.rawGBps)
		}
		fmt.Fprintf(tw, "  prefill breakdown\thost queued each prefill in %s / %s; alone: compute %s, paging %s%s\n",
			ms(r.hostEnqueued[0]), ms(r.hostEnqueued[1]), ms(r.computeAlone), ms(r.pagingAlone), alone)
	}
	fmt.Fprintf(tw, "  transfer path per layer\t%s\n", pathSummary(r.paths))
	fmt.Fprintf(tw, "  graph segments\t%d (split around NonZero: %.1f of %d units active on average)\n", r.segments, r.seamMean, cfg.width)
	fmt.Fprintf(tw, "  replay, segmented + seam\t%s/token (upload x, segment 0, NonZero + host read, segment 1, read y)\n", us(r.segmentedPerToken))
	fmt.Fprintf(tw, "  replay, whole step\t%s/token (upload x, replay, read y)\n", us(r.wholePerToken))
	fmt.Fprintf(tw, "  replay only\t%s/token (%d back-to-back replays of the whole step)\n", us(r.replayOnly), cfg.tokens)
	fmt.Fprintf(tw, "  allocations during replay\t%d Go heap, %d device\n", r.goAllocs, r.deviceAllocs)
	fmt.Fprintf(tw, "  outputs\t%d/%d tokens match the float64 reference, both replays (max rel err %.2g)\n", cfg.tokens, cfg.tokens, r.decodeErr)
	return tw.Flush()
}

// pathSummary lists each layer's path, folding runs: "0-6 zero-copy, 7 staging".
func pathSummary(paths []string) string {
	var parts []string
	for i := 0; i < len(paths); {
		j := i
		for j+1 < len(paths) && paths[j+1] == paths[i] {
			j++
		}
		layers := fmt.Sprint(i)
		if j > i {
			layers = fmt.Sprintf("%d-%d", i, j)
		}
		parts = append(parts, layers+" "+paths[i])
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1000) }
