package cuda

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

// StreamBeginCapture starts capturing the work queued on s into a graph instead of running
// it. With CaptureModeThreadLocal the capture must end on the same OS thread.
func (b *Backend) StreamBeginCapture(s cudadrv.RawStream, mode cudadrv.CaptureMode) error {
	return cudadrv.NewError("cuStreamBeginCapture_v2", b.drv.cuStreamBeginCapture_v2(s, mode))
}

// StreamEndCapture ends the capture on s and returns the captured graph, which the caller
// destroys with GraphDestroy. A capture that was invalidated returns
// ErrorStreamCaptureInvalidated and no graph; the stream is out of capture either way.
func (b *Backend) StreamEndCapture(s cudadrv.RawStream) (cudadrv.RawGraph, error) {
	var g cudadrv.RawGraph
	r := b.drv.cuStreamEndCapture(s, &g)
	if err := cudadrv.NewError("cuStreamEndCapture", r); err != nil {
		if g != 0 {
			// The driver hands no graph back on failure; should one appear regardless, do
			// not leak it.
			_ = b.drv.cuGraphDestroy(g)
		}
		return 0, err
	}
	return g, nil
}

// StreamCaptureStatus reports whether s is capturing (cuStreamIsCapturing).
func (b *Backend) StreamCaptureStatus(s cudadrv.RawStream) (cudadrv.CaptureStatus, error) {
	var st cudadrv.CaptureStatus
	if err := cudadrv.NewError("cuStreamIsCapturing", b.drv.cuStreamIsCapturing(s, &st)); err != nil {
		return cudadrv.CaptureStatusNone, err
	}
	return st, nil
}

// GraphNodeCount returns the number of nodes in g (cuGraphGetNodes with a NULL array).
func (b *Backend) GraphNodeCount(g cudadrv.RawGraph) (int, error) {
	var n uintptr
	if err := cudadrv.NewError("cuGraphGetNodes", b.drv.cuGraphGetNodes(g, nil, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// GraphInstantiate instantiates g into an executable graph, which the caller destroys with
// GraphExecDestroy. g may be destroyed afterwards.
func (b *Backend) GraphInstantiate(g cudadrv.RawGraph, flags cudadrv.InstantiateFlags) (cudadrv.RawGraphExec, error) {
	var e cudadrv.RawGraphExec
	dumpGraph(uintptr(g))
	if err := cudadrv.NewError("cuGraphInstantiateWithFlags", b.drv.cuGraphInstantiateWithFlags(&e, g, uint64(flags))); err != nil {
		return 0, err
	}
	return e, nil
}

// GraphUpload uploads e's device resources ahead of its first launch, on s.
func (b *Backend) GraphUpload(e cudadrv.RawGraphExec, s cudadrv.RawStream) error {
	return cudadrv.NewError("cuGraphUpload", b.drv.cuGraphUpload(e, s))
}

// GraphLaunch queues one replay of e on s. It is a hot call: it allocates nothing.
func (b *Backend) GraphLaunch(e cudadrv.RawGraphExec, s cudadrv.RawStream) error {
	f := cframe{fn: b.drv.addr[symGraphLaunch], a: [maxCCallArgs]uintptr{uintptr(e), uintptr(s)}}
	return cudadrv.NewError("cuGraphLaunch", cudadrv.Result(ccall(&f)))
}

// graphExecUpdateResultNames are the CUgraphExecUpdateResult names, by value.
var graphExecUpdateResultNames = [...]string{
	"CU_GRAPH_EXEC_UPDATE_SUCCESS",
	"CU_GRAPH_EXEC_UPDATE_ERROR",
	"CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE",
	"CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED",
}

// graphExecUpdateResultName names a CUgraphExecUpdateResult.
func graphExecUpdateResultName(v int32) string {
	if v >= 0 && int(v) < len(graphExecUpdateResultNames) {
		return graphExecUpdateResultNames[v]
	}
	return fmt.Sprintf("CUgraphExecUpdateResult(%d)", v)
}

// GraphExecUpdate updates e in place to match g (same topology, changed parameters), which is
// much cheaper than instantiating g afresh.
//
// # Errors
//
// When the driver refuses the update (the topology, a node type or a function changed), the
// error is a *cudadrv.Error with ErrorGraphExecUpdateFailure whose Detail names the driver's
// CUgraphExecUpdateResult; e is then unchanged and must be replaced by a new instantiation.
func (b *Backend) GraphExecUpdate(e cudadrv.RawGraphExec, g cudadrv.RawGraph) error {
	// info escapes through the wrapper: one allocation on this cold call; the driver writes it
	// during the call only.
	info := new(graphExecUpdateResultInfo)
	r := b.drv.cuGraphExecUpdate_v2(e, g, info)
	if r == cudadrv.Success && info.result == 0 {
		return nil
	}
	if r == cudadrv.Success || r == cudadrv.ErrorGraphExecUpdateFailure {
		return &cudadrv.Error{
			Op:     "cuGraphExecUpdate_v2",
			Result: cudadrv.ErrorGraphExecUpdateFailure,
			Detail: graphExecUpdateResultName(info.result),
		}
	}
	return cudadrv.NewError("cuGraphExecUpdate_v2", r)
}

// GraphExecDestroy destroys an executable graph. Replays already queued still complete.
func (b *Backend) GraphExecDestroy(e cudadrv.RawGraphExec) error {
	return cudadrv.NewError("cuGraphExecDestroy", b.drv.cuGraphExecDestroy(e))
}

// GraphDestroy destroys a graph from StreamEndCapture.
func (b *Backend) GraphDestroy(g cudadrv.RawGraph) error {
	return cudadrv.NewError("cuGraphDestroy", b.drv.cuGraphDestroy(g))
}
