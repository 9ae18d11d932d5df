package sim

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

// graph is a CUgraph: the nodes a capture recorded, in a valid topological order.
type graph struct {
	handle cudadrv.RawGraph
	nodes  []op
}

// graphExec is a CUgraphExec. nodes is immutable once set: an update installs a new slice,
// so launches already queued replay what was current when they were enqueued.
type graphExec struct {
	handle cudadrv.RawGraphExec
	ctx    *context
	nodes  []op
	flags  cudadrv.InstantiateFlags
	// The stream and position of the latest launch: a launch is ordered behind the previous
	// launch of the same executable, whatever stream that was on.
	lastStream *stream
	lastPos    uint64
}

// validInstantiateFlags are the flags cuGraphInstantiateWithFlags accepts; UPLOAD is only
// valid through cuGraphInstantiateWithParams.
const validInstantiateFlags = cudadrv.InstantiateAutoFreeOnLaunch | cudadrv.InstantiateDeviceLaunch | cudadrv.InstantiateUseNodePriority

func (d *Device) graph(op string, h cudadrv.RawGraph) (*graph, error) {
	g := d.graphs[h]
	if g == nil {
		return nil, fail(op, cudadrv.ErrorInvalidHandle, "graph %#x does not exist (destroyed or never created)", uintptr(h))
	}
	return g, nil
}

func (d *Device) exec(op string, c *context, h cudadrv.RawGraphExec) (*graphExec, error) {
	x := d.execs[h]
	if x == nil {
		return nil, fail(op, cudadrv.ErrorInvalidHandle, "graph exec %#x does not exist (destroyed or never created)", uintptr(h))
	}
	if x.ctx != c {
		return nil, fail(op, cudadrv.ErrorInvalidHandle, "graph exec %#x belongs to another context", uintptr(h))
	}
	return x, nil
}

// GraphNodeCount returns the number of nodes in g. Captured event records and waits are
// edges, not nodes; a captured graph launch is one child-graph node; a GEMM is one node.
func (d *Device) GraphNodeCount(h cudadrv.RawGraph) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpGraphNodeCount); err != nil {
		return 0, err
	}
	g, err := d.graph(OpGraphNodeCount, h)
	if err != nil {
		return 0, err
	}
	return len(g.nodes), nil
}

// GraphInstantiate makes an executable graph of g in the current context. flags may combine
// InstantiateAutoFreeOnLaunch, InstantiateDeviceLaunch and InstantiateUseNodePriority;
// InstantiateUpload or unknown bits are CUDA_ERROR_INVALID_VALUE, as with
// cuGraphInstantiateWithFlags.
func (d *Device) GraphInstantiate(h cudadrv.RawGraph, flags cudadrv.InstantiateFlags) (cudadrv.RawGraphExec, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpGraphInstantiate)
	if err != nil {
		return 0, err
	}
	g, err := d.graph(OpGraphInstantiate, h)
	if err != nil {
		return 0, err
	}
	if flags&^validInstantiateFlags != 0 {
		return 0, fail(OpGraphInstantiate, cudadrv.ErrorInvalidValue, "flags %#x are not accepted by cuGraphInstantiateWithFlags", uint64(flags))
	}
	x := &graphExec{handle: cudadrv.RawGraphExec(d.handle()), ctx: c, nodes: append([]op(nil), g.nodes...), flags: flags}
	d.execs[x.handle] = x
	return x.handle, nil
}

// GraphUpload validates e and s; the simulator has nothing to upload.
func (d *Device) GraphUpload(e cudadrv.RawGraphExec, sh cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpGraphUpload)
	if err != nil {
		return err
	}
	if _, err := d.exec(OpGraphUpload, c, e); err != nil {
		return err
	}
	s, err := d.stream(OpGraphUpload, c, sh)
	if err != nil {
		return err
	}
	if s.capture != nil && s.capture.invalid != "" {
		return s.capture.invalidatedError(OpGraphUpload)
	}
	return nil
}

// GraphLaunch queues the executable graph on s as one unit of work that replays its nodes
// in order against live memory. As in CUDA, the launch is also ordered behind the previous
// launch of the same executable on any stream. On a capturing stream it records a
// child-graph node.
func (d *Device) GraphLaunch(e cudadrv.RawGraphExec, sh cudadrv.RawStream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpGraphLaunch)
	if err != nil {
		return err
	}
	x, err := d.exec(OpGraphLaunch, c, e)
	if err != nil {
		return err
	}
	s, err := d.stream(OpGraphLaunch, c, sh)
	if err != nil {
		return err
	}
	o := op{kind: opGraph, nodes: x.nodes}
	if s.capture != nil {
		return d.record(OpGraphLaunch, s, &o)
	}
	if s.legacy {
		if err := d.checkImplicit(OpGraphLaunch, c); err != nil {
			return err
		}
	}
	if p := x.lastStream; p != nil && p != s && p.done < x.lastPos {
		d.enqueue(s, &op{kind: opWait, target: p, pos: x.lastPos})
	}
	x.lastStream, x.lastPos = s, d.enqueue(s, &o)
	return nil
}

// GraphExecUpdate updates e's node parameters from g when the two have the same topology:
// the same number of nodes, of the same kinds, kernels of the same functions, GEMMs of the
// same shape and transposes, child graphs that match recursively. Otherwise it fails with
// CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE (detail: the first difference) and e is unchanged.
// Launches already queued keep the parameters they were launched with.
func (d *Device) GraphExecUpdate(e cudadrv.RawGraphExec, h cudadrv.RawGraph) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enter(OpGraphExecUpdate)
	if err != nil {
		return err
	}
	x, err := d.exec(OpGraphExecUpdate, c, e)
	if err != nil {
		return err
	}
	g, err := d.graph(OpGraphExecUpdate, h)
	if err != nil {
		return err
	}
	if why := topologyDiff(x.nodes, g.nodes, ""); why != "" {
		return fail(OpGraphExecUpdate, cudadrv.ErrorGraphExecUpdateFailure, "%s", why)
	}
	x.nodes = append([]op(nil), g.nodes...)
	return nil
}

// topologyDiff describes the first difference that prevents updating nodes a from b, or "".
func topologyDiff(a, b []op, path string) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%snode count differs: %d vs %d", path, len(a), len(b))
	}
	for i := range a {
		x, y := &a[i], &b[i]
		where := fmt.Sprintf("%snode %d", path, i)
		switch {
		case x.kind != y.kind:
			return fmt.Sprintf("%s: %s vs %s", where, x.kind, y.kind)
		case x.kind == opKernel && x.fn != y.fn:
			return fmt.Sprintf("%s: kernel %q vs %q", where, x.fn.name, y.fn.name)
		case x.kind == opGemm && (x.gemm.TransA != y.gemm.TransA || x.gemm.TransB != y.gemm.TransB ||
			x.gemm.M != y.gemm.M || x.gemm.N != y.gemm.N || x.gemm.K != y.gemm.K ||
			x.batched != y.batched || x.gemm.BatchCount != y.gemm.BatchCount || x.gemm.Type != y.gemm.Type):
			return fmt.Sprintf("%s: GEMM shape or transposes differ", where)
		case x.kind == opGraph:
			if why := topologyDiff(x.nodes, y.nodes, where+" > "); why != "" {
				return why
			}
		}
	}
	return ""
}

// GraphExecDestroy destroys an executable graph; queued launches of it still run. An unknown
// or already destroyed handle is CUDA_ERROR_INVALID_HANDLE.
func (d *Device) GraphExecDestroy(e cudadrv.RawGraphExec) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.enterAny(OpGraphExecDestroy)
	if err != nil {
		return err
	}
	if _, err := d.exec(OpGraphExecDestroy, c, e); err != nil {
		return err
	}
	delete(d.execs, e)
	return stickyOf(OpGraphExecDestroy, c)
}

// GraphDestroy destroys a graph; executables made from it are unaffected. An unknown or
// already destroyed handle is CUDA_ERROR_INVALID_HANDLE.
func (d *Device) GraphDestroy(h cudadrv.RawGraph) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpGraphDestroy); err != nil {
		return err
	}
	if _, err := d.graph(OpGraphDestroy, h); err != nil {
		return err
	}
	delete(d.graphs, h)
	return nil
}
