// Command cudaep-demo creates an execution provider and reports what it got: the C ABI and
// library versions, the backend (and, for backend=auto, why), and the device.
//
// Usage:
//
//	cudaep-demo [-backend=cuda|sim|auto] [-device=N] [-option key=value ...]
//
// The default backend is cuda, as for the library; `make demo` runs it with -backend=auto so
// that it works on machines without a GPU. -option sets any provider option by key (see
// ep.Options), so the demo accepts exactly what the C and Python hosts accept.
//
// Exit status: 0 on success, 1 when the provider cannot be created, 2 for bad flags.
package main

import (
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

// run is the whole program, with its arguments and output streams passed in for tests.
func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "cudaep-demo: %v\n", err)
		}
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

// parseFlags turns the command line into provider options, validated by ep.Options.Set.
func parseFlags(args []string, stderr io.Writer) (ep.Options, error) {
	fs := flag.NewFlagSet("cudaep-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backend := fs.String("backend", ep.BackendCUDA, "backend: cuda, sim or auto")
	device := fs.Int("device", 0, "CUDA device ordinal")
	var extra optionList
	fs.Var(&extra, "option", "provider option as key=value (repeatable); keys: "+
		strings.Join(ep.OptionKeys(), ", "))
	if err := fs.Parse(args); err != nil {
		return ep.Options{}, err
	}
	if fs.NArg() > 0 {
		return ep.Options{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	opts := ep.DefaultOptions()
	settings := append([][2]string{
		{ep.OptionBackend, *backend},
		{ep.OptionDeviceID, strconv.Itoa(*device)},
	}, extra...)
	for _, kv := range settings {
		if err := opts.Set(kv[0], kv[1]); err != nil {
			return ep.Options{}, err
		}
	}
	return opts, nil
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
