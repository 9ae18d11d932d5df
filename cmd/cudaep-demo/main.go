// Command cudaep-demo runs cudaep end to end on a small N-layer MLP and reports what it saw.
//
// It creates a provider and prints the C ABI and library versions, the backend (and, for
// backend=auto, why) and the device. Then it writes (once, into -data) the model's weights as
// an ONNX-style external-data file, pages its layers through the prefill double buffer while
// computing a prefill batch, captures the one-token decode step (whole, and in two segments
// around a NonZero seam that needs a host read), replays it for -tokens tokens, checks every
// output against a float64 host reference, and prints a compact table: prefill time and GB/s,
// the transfer path of each layer, replay µs per token, graph segments, and the allocations
// made during replay (zero).
//
// Usage:
//
//	cudaep-demo [-backend=cuda|sim|auto] [-device=N] [-layers=N] [-width=N] [-prefill=N]
//	            [-tokens=N] [-data=DIR] [-option key=value ...] [-progress=auto|lines|off]
//	cudaep-demo -version | -help
//
// The default backend is cuda, as for the library; `make demo` runs it with -backend=auto so
// that it works on machines without a GPU, and then says plainly that it ran on the simulator.
// -option sets any provider option by key (see ep.Options), so the demo accepts exactly what
// the C and Python hosts accept; the prefill double buffer is on unless
// -option prefill_double_buffer=false, and its slots are reserved at the layers' size when the
// provider is created unless -option residency_slot_bytes=N says otherwise.
//
// Progress goes to stderr (-progress): with auto (the default) one overwritten line on a
// terminal, and, when stderr is not a terminal, a line per phase step for runs long enough to
// take the simulator minutes (longRunMACs); lines prints those always, off never.
//
// -version prints the program's and the library's version and the C ABI version; -help (or
// -h, --help) prints the usage, both on stdout.
//
// Exit status: 0 on success (and for -version and -help), 1 when the provider cannot be
// created or a check fails, 2 for bad flags.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cudaep/cudaep/capi/abi"
	"github.com/cudaep/cudaep/ep"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errVersion is what parseFlags returns for -version.
var errVersion = errors.New("version requested")

// run is the whole program, with its arguments and output streams passed in for tests.
func run(args []string, stdout, stderr io.Writer) int {
	// The flag package prints the usage both for -help (wanted on stdout) and for a bad flag
	// (on stderr, with the error): collect it and decide.
	var usage bytes.Buffer
	opts, cfg, err := parseFlags(args, &usage)
	switch {
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(usage.Bytes())
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "cudaep-demo %s (C ABI %d)\n", ep.Version, abi.Version)
		return 0
	case err != nil:
		stderr.Write(usage.Bytes())
		fmt.Fprintf(stderr, "cudaep-demo: %v\n", err)
		return 2
	}
	p, err := ep.New(opts)
	if err != nil {
		fmt.Fprintf(stderr, "cudaep-demo: create provider (%s): %v\n", opts, err)
		return 1
	}
	defer p.Close()

	if err := newReport(p).write(stdout); err != nil {
		fmt.Fprintf(stderr, "cudaep-demo: %v\n", err)
		return 1
	}
	if p.BackendName() == ep.BackendSim {
		fmt.Fprintln(stdout, "\nThis run uses the SIMULATED device (no CUDA GPU was used): results are checked,\nbut the timings below are not GPU performance.")
	}
	f, isFile := stderr.(*os.File)
	progress, endProgress := newProgress(cfg.progress, cfg, stderr, isFile && isTerminal(f))
	res, err := runModel(p, cfg, progress)
	endProgress()
	if err != nil {
		fmt.Fprintf(stderr, "\ncudaep-demo: %v\n", err)
		return 1
	}
	if err := res.write(stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "cudaep-demo: %v\n", err)
		return 1
	}
	if err := p.Close(); err != nil {
		fmt.Fprintf(stderr, "cudaep-demo: close provider: %v\n", err)
		return 1
	}
	return 0
}

// optionList collects repeated -option key=value flags.
type optionList [][2]string

func (l *optionList) String() string { return fmt.Sprint(*l) }

func (l *optionList) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("want key=value, got %q", kv)
	}
	*l = append(*l, [2]string{k, v})
	return nil
}

// parseFlags turns the command line into provider options, validated by ep.Options.Set, and
// the size of the run. The flag package's usage and messages go to out. It returns
// flag.ErrHelp for -help and errVersion for -version.
func parseFlags(args []string, out io.Writer) (ep.Options, config, error) {
	fs := flag.NewFlagSet("cudaep-demo", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: cudaep-demo [flags]\n\n"+
			"Pages an MLP's weights from an external-data file through the prefill double buffer,\n"+
			"captures and replays its decode step, and checks every output against a float64\n"+
			"reference. `make demo` runs it with -backend=auto.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	version := fs.Bool("version", false, "print the version and exit")
	backend := fs.String("backend", ep.BackendCUDA, "backend: cuda, sim or auto")
	device := fs.Int("device", 0, "CUDA device ordinal")
	var cfg config
	fs.StringVar(&cfg.progress, "progress", progressAuto, "progress on stderr: auto (a line on a terminal; phase lines for long runs elsewhere), lines or off")
	fs.IntVar(&cfg.layers, "layers", 8, "MLP layers (at least 2)")
	fs.IntVar(&cfg.width, "width", 512, "MLP width (at least 8)")
	fs.IntVar(&cfg.prefill, "prefill", 32, "prefill batch rows")
	fs.IntVar(&cfg.tokens, "tokens", 32, "decode tokens to replay")
	fs.StringVar(&cfg.dataDir, "data", "build/demo", "directory for the external-data weight file")
	var extra optionList
	fs.Var(&extra, "option", "provider option as key=value (repeatable); keys: "+
		strings.Join(ep.OptionKeys(), ", "))
	if err := fs.Parse(args); err != nil {
		return ep.Options{}, cfg, err
	}
	if *version {
		return ep.Options{}, cfg, errVersion
	}
	switch cfg.progress {
	case progressAuto, progressLines, progressOff:
	default:
		return ep.Options{}, cfg, fmt.Errorf("-progress=%q: want auto, lines or off", cfg.progress)
	}
	if fs.NArg() > 0 {
		return ep.Options{}, cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for _, c := range []struct {
		name     string
		v, least int
	}{{"layers", cfg.layers, 2}, {"width", cfg.width, 8}, {"prefill", cfg.prefill, 1}, {"tokens", cfg.tokens, 1}} {
		if c.v < c.least || c.v > 1<<16 {
			return ep.Options{}, cfg, fmt.Errorf("-%s=%d: want %d..65536", c.name, c.v, c.least)
		}
	}

	opts := ep.DefaultOptions()
	opts.PrefillDoubleBuffer = true
	settings := append([][2]string{
		{ep.OptionBackend, *backend},
		{ep.OptionDeviceID, strconv.Itoa(*device)},
	}, extra...)
	slotSet := false
	for _, kv := range settings {
		if err := opts.Set(kv[0], kv[1]); err != nil {
			return ep.Options{}, cfg, err
		}
		slotSet = slotSet || kv[0] == ep.OptionResidencySlotBytes
	}
	// Reserve the residency's slots, sized by the layers, when the provider is created, so
	// that the prefill sets nothing up (unless the host chose a size, or two staging buffers
	// of a layer would not fit the staging pool: then the first layer sizes them, as before).
	layerBytes := uint64(4 * cfg.width * (cfg.width + 1))
	if !slotSet && 2*((layerBytes+(64<<10)-1)/(64<<10)*(64<<10)) <= opts.StagingPoolCapBytes {
		opts.ResidencySlotBytes = layerBytes
	}
	cfg.tolerance = 1e-4
	if opts.TF32 {
		cfg.tolerance = 5e-3
	}
	return opts, cfg, nil
}

// report is what the demo prints, gathered first so that printing cannot fail halfway
// through talking to the device.
type report struct {
	abiVersion     int
	libraryVersion string
	backend        string
	autoReason     string
	device         ep.DeviceInfo
}

func newReport(p *ep.Provider) report {
	return report{
		abiVersion:     abi.Version,
		libraryVersion: ep.Version,
		backend:        p.BackendName(),
		autoReason:     p.AutoReason(),
		device:         p.Device(),
	}
}

// write prints r as an aligned two-column table.
func (r report) write(w io.Writer) error {
	backend := r.backend
	if r.autoReason != "" {
		backend += " (" + r.autoReason + ")"
	}
	d := r.device
	rows := [][2]string{
		{"ABI version", strconv.Itoa(r.abiVersion)},
		{"library version", r.libraryVersion},
		{"backend", backend},
		{"device", fmt.Sprintf("%d: %s", d.Ordinal, d.Name)},
		{"compute capability", fmt.Sprintf("%d.%d", d.Major, d.Minor)},
		{"multiprocessors", strconv.Itoa(d.Multiprocessors)},
		{"memory", fmt.Sprintf("%s total, %s free", gib(d.TotalMemory), gib(d.FreeMemory))},
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cudaep demo")
	for _, row := range rows {
		fmt.Fprintf(tw, "  %s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

// gib formats a byte count in GiB with one decimal.
func gib(bytes uint64) string {
	return fmt.Sprintf("%.1f GiB", float64(bytes)/(1<<30))
}
