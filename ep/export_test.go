package ep

import (
	"maps"
	"testing"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep/kernels"
)

// ContextOf returns p's driver context, for the black-box tests that look under the provider
// (counters, sticky errors, the backend).
func ContextOf(p *Provider) *cudadrv.Context { return p.ctx }

// UserEntries exposes the reading of a user module's entry points to the black-box tests.
var UserEntries = userEntries

// GateOf exposes the provider's device capture gate to the black-box tests.
func GateOf(p *Provider) interface{ WaitingDrains() int } { return p.gate }

// SetSpinBudget sets how long p's SynchronizeCompute spins before it hands the wait to the
// driver, for tests that need the spin to win (a long budget) or to give up (a short one).
// Call it before p is used concurrently.
func SetSpinBudget(p *Provider, d time.Duration) { p.spinBudget = d }

// UseSimOptions makes the sim backends opened until t ends use opts (its Kernels added to the
// library's). It fails t when a sim backend is open now, since that one would be shared.
func UseSimOptions(t testing.TB, opts sim.Options) {
	t.Helper()
	backends.Lock()
	open := cudadrv.SharedOpen(BackendSim)
	backends.Unlock()
	if open {
		t.Fatal("ep: UseSimOptions: a sim backend is open; close its providers first")
	}
	prev := simOptions
	simOptions = func() sim.Options {
		o := opts
		k := kernels.SimKernels()
		maps.Copy(k, opts.Kernels)
		o.Kernels = k
		return o
	}
	t.Cleanup(func() { simOptions = prev })
}

// ComputeIdle reports whether p's compute stream has no work left (cuStreamQuery).
func ComputeIdle(p *Provider) (bool, error) { return p.compute.Query() }

// UploadSlotBytes and UploadSlots are CopyToDevice's staging geometry.
const UploadSlotBytes, UploadSlots = uploadSlotBytes, uploadSlots
