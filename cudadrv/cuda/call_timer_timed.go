//go:build cudaep_phases

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// A measurement build's timing of the hot driver calls (ccall): every 64 calls of one entry
// point, the median, 90th percentile and maximum of their host time go to stderr.

const callBatch = 64

type callClock struct{ t time.Time }

var calls struct {
	mu    sync.Mutex
	d     map[uintptr][]time.Duration
	names map[uintptr]string
}

func startCall() callClock { return callClock{time.Now()} }

func (c callClock) done(fn uintptr) {
	d := time.Since(c.t)
	calls.mu.Lock()
	defer calls.mu.Unlock()
	if calls.d == nil {
		calls.d = map[uintptr][]time.Duration{}
	}
	s := append(calls.d[fn], d)
	if len(s) < callBatch {
		calls.d[fn] = s
		return
	}
	calls.d[fn] = s[:0]
	s = slices.Clone(s)
	slices.Sort(s)
	fmt.Fprintf(os.Stderr, "CALLS %s over %d: median %.1f us, p90 %.1f, min %.1f, max %.1f\n", callName(fn), callBatch,
		us(s[callBatch/2]), us(s[callBatch*9/10]), us(s[0]), us(s[callBatch-1]))
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// callName names a driver entry point by its address (called with calls.mu held).
func callName(fn uintptr) string {
	if calls.names == nil {
		calls.names = map[uintptr]string{}
		if h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			for _, n := range driverSymbols {
				if a, err := purego.Dlsym(h, n); err == nil {
					calls.names[a] = n
				}
			}
		}
	}
	if n, ok := calls.names[fn]; ok {
		return n
	}
	return fmt.Sprintf("%#x", fn)
}

var dumped atomic.Int64

// dumpGraph writes the graph's DOT description (cuGraphDebugDotPrint, verbose) into
// $CUDAEP_GRAPH_DOT_DIR, when set, before it is instantiated.
func dumpGraph(g uintptr) {
	dir := os.Getenv("CUDAEP_GRAPH_DOT_DIR")
	if dir == "" {
		return
	}
	h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return
	}
	fn, err := purego.Dlsym(h, "cuGraphDebugDotPrint")
	if err != nil {
		return
	}
	path := append([]byte(filepath.Join(dir, fmt.Sprintf("graph-%03d.dot", dumped.Add(1)))), 0)
	r, _, _ := purego.SyscallN(fn, g, uintptr(unsafe.Pointer(&path[0])), 1)
	if r != 0 {
		fmt.Fprintf(os.Stderr, "CALLS cuGraphDebugDotPrint: CUresult %d\n", r)
	}
}
