package partition

import (
	"fmt"
	"sync"

	"github.com/cudaep/cudaep/ep"
)

// Options are how a session's partitions run.
type Options struct {
	// CUDAGraph captures each partition per input shapes (and per set of in-place addresses)
	// and replays it.
	CUDAGraph bool
	// Paging says when external-data weights stream through a double buffer during each run
	// instead of staying resident (see placeWeights); WeightBudget is the device bytes a
	// partition's weights may hold (0: no budget).
	Paging       PagingMode
	WeightBudget uint64
	// Fusion runs the chains Fuse knows as one kernel each; false runs the graph node for node.
	Fusion bool
	// KeyPrefix is how the host names these options in error messages: the option keys are
	// KeyPrefix + enable_cuda_graph, paging, weight_budget_bytes and fusion ("ep.cudaep." for
	// ONNX Runtime's session config keys).
	KeyPrefix string
}

// key names option name as the host does.
func (o Options) key(name string) string { return o.KeyPrefix + name }

// Session is the partitions a host runs on one provider: they share its stream, so a run that
// captures a CUDA graph excludes the session's other runs (the capture window), and they take
// their graphs' slots from one counter.
type Session struct {
	p    *ep.Provider
	opts Options
	mem  *Memory
	info func(msg string)

	mu       sync.Mutex
	nextSlot int64 // keyed graph slots handed to partitions

	// runs is held shared by the partitions' runs and exclusively by a run that captures a
	// graph: no other run may use the provider's stream during a capture.
	runs sync.RWMutex
}

// NewSession makes a session on p. mem is the index of the device memory the host hands runs
// (nil: every device tensor is copied, none read in place); info receives the messages a host
// logs at its informational level (what a partition fused; nil drops them).
func NewSession(p *ep.Provider, opts Options, mem *Memory, info func(msg string)) (*Session, error) {
	switch opts.Paging {
	case PagingAuto, PagingOn, PagingOff:
	default:
		return nil, fmt.Errorf("%w: option %s=%q: expected auto, on or off", ep.ErrInvalidArgument, opts.key("paging"), opts.Paging)
	}
	if mem == nil {
		mem = &Memory{}
	}
	if info == nil {
		info = func(string) {}
	}
	return &Session{p: p, opts: opts, mem: mem, info: info}, nil
}

// slotFor hands out a fresh keyed slot for a partition's captured graph.
func (s *Session) slotFor() ep.Slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextSlot++
	return ep.Keyed(s.nextSlot)
}

// Share waits until no run of the session is capturing a graph and keeps it so until the
// returned func is called: for work of the host's own on the session's stream (a copy ORT
// queues there), which a capture forbids.
func (s *Session) Share() (done func()) {
	s.runs.RLock()
	return s.runs.RUnlock
}
