package partition

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Graph is the subgraph a host hands to one provider: its nodes (in any order), the names of
// its inputs and outputs in the host's order, and its constant initializers.
type Graph struct {
	Name         string
	Nodes        []Node
	Inputs       []string
	Outputs      []string
	Initializers []Initializer
}

// Partition is one compiled graph: its kernels' nodes in topological order (chains fused unless
// the session's Fusion is off), its weights on the device, and per input-shape key a plan
// (kernels, intermediate buffers and, with CUDA graphs, the graphs captured). Runs of one
// partition serialize on mu.
type Partition struct {
	s       *Session
	name    string
	nodes   []Node
	inputs  []string
	outputs []string
	w       *weights

	mu    sync.Mutex
	plans map[string]*plan

	// What a run leaves for the next, guarded by mu (Run): the plan of the last run, its key's
	// scratch, the remembered decisions (decide) and the scratch they are made in, and how many
	// runs reused one.
	key    []byte
	last   *plan
	recent [recentRuns]recentRun
	// nextRecent is the entry of recent the next decision kept replaces.
	nextRecent int
	sig        []tensorSig
	regs       []*registration
	reused     uint64
}

// Compile orders g's nodes, fuses the chains the session's provider runs as one kernel (unless
// the session's Fusion is off), and loads the weights onto the device: resident, or paged
// (Options.Paging). The initializers' in-memory bytes are copied; the host may drop them once
// Compile returns.
func (s *Session) Compile(g Graph) (*Partition, error) {
	ordered := make([]Node, 0, len(g.Nodes))
	for _, i := range TopoOrder(Values(g.Nodes)) {
		ordered = append(ordered, g.Nodes[i])
	}
	pt := &Partition{s: s, name: g.Name, plans: map[string]*plan{}, nodes: ordered,
		inputs: append([]string(nil), g.Inputs...), outputs: append([]string(nil), g.Outputs...)}
	if s.opts.Fusion {
		pt.nodes = Fuse(s.p, ordered, pt.outputs)
		if len(pt.nodes) < len(ordered) {
			counters.fusedNodes.Add(uint64(len(ordered) - len(pt.nodes) + fusedKernels(pt.nodes, ordered)))
			s.info(fmt.Sprintf("fused partition %s: %d nodes run as %d kernels (%s)",
				pt.name, len(ordered), len(pt.nodes), opCounts(pt.nodes)))
		}
	}
	var err error
	if pt.w, err = s.loadWeights(pt.nodes, g.Initializers); err != nil {
		return nil, errors.Join(fmt.Errorf("partition %s: %w", pt.name, err), pt.Close())
	}
	return pt, nil
}

// Name is the graph's name.
func (pt *Partition) Name() string { return pt.name }

// Inputs and Outputs are the names of the graph's inputs and outputs, in the host's order.
func (pt *Partition) Inputs() []string  { return pt.inputs }
func (pt *Partition) Outputs() []string { return pt.outputs }

// Nodes are the nodes the partition runs, in order, fused chains as one node each.
func (pt *Partition) Nodes() []Node { return pt.nodes }

// Close releases the partition's plans (their buffers and graphs) and its weights. Runs must
// be over.
func (pt *Partition) Close() error {
	pt.reportPhases()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var errs []error
	for _, pl := range pt.plans {
		errs = append(errs, pl.release(pt.s.p))
	}
	pt.plans, pt.last = nil, nil
	pt.forget()
	if pt.w != nil {
		errs = append(errs, pt.w.release(pt.s.p))
		pt.w = nil
	}
	return errors.Join(errs...)
}

// opCounts lists how many of nodes each operator has, in order of first appearance ("MatMul
// x4, Add x2"): what a fused partition runs, views (which launch nothing) included.
func opCounts(nodes []Node) string {
	var order []string
	count := map[string]int{}
	for _, n := range nodes {
		op := n.Op
		if count[op] == 0 {
			order = append(order, op)
		}
		count[op]++
	}
	parts := make([]string, len(order))
	for i, op := range order {
		parts[i] = fmt.Sprintf("%s x%d", op, count[op])
	}
	return strings.Join(parts, ", ")
}

// fusedKernels counts the nodes of fused that are not in orig: the kernels fusion made.
func fusedKernels(fused, orig []Node) int {
	names := map[string]bool{}
	for _, n := range orig {
		names[n.Name+"\x00"+n.Op] = true
	}
	k := 0
	for _, n := range fused {
		if !names[n.Name+"\x00"+n.Op] {
			k++
		}
	}
	return k
}
