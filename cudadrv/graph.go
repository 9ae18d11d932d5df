package cudadrv

import "sync/atomic"

// Graph is a recorded graph of device work (from EndCapture). Destroy it exactly once; a
// GraphExec instantiated from it stays valid after the graph is destroyed.
type Graph struct {
	ctx       *Context
	raw       RawGraph
	destroyed atomic.Bool
}

// Raw returns the driver's graph handle.
func (g *Graph) Raw() RawGraph { return g.raw }

func (g *Graph) live() error {
	if g == nil {
		return &Error{Op: "cuGraph", Result: ErrorInvalidValue, Detail: "nil graph"}
	}
	if g.destroyed.Load() {
		return ErrDestroyed
	}
	return nil
}

// NodeCount returns the number of nodes in the graph.
func (g *Graph) NodeCount() (int, error) {
	if err := g.live(); err != nil {
		return 0, err
	}
	n, err := g.ctx.b.GraphNodeCount(g.raw)
	return n, g.ctx.note(err)
}

// Instantiate makes an executable graph (cuGraphInstantiateWithFlags).
func (g *Graph) Instantiate(flags InstantiateFlags) (*GraphExec, error) {
	if err := g.live(); err != nil {
		return nil, err
	}
	raw, err := g.ctx.b.GraphInstantiate(g.raw, flags)
	if err != nil {
		return nil, g.ctx.note(err)
	}
	g.ctx.count.execsCreated.Add(1)
	return &GraphExec{ctx: g.ctx, raw: raw}, nil
}

// Destroy destroys the graph; a second call returns ErrDestroyed and never reaches the driver.
func (g *Graph) Destroy() error {
	if g == nil {
		return nil
	}
	if !g.destroyed.CompareAndSwap(false, true) {
		return ErrDestroyed
	}
	if err := g.ctx.b.GraphDestroy(g.raw); err != nil {
		return g.ctx.note(err)
	}
	g.ctx.count.graphsDestroyed.Add(1)
	return nil
}

// GraphExec is an executable graph. Launch is safe from several goroutines; Update and Destroy
// must not race with launches (the graphs package serializes them).
type GraphExec struct {
	ctx       *Context
	raw       RawGraphExec
	destroyed atomic.Bool
}

// Raw returns the driver's executable-graph handle.
func (e *GraphExec) Raw() RawGraphExec { return e.raw }

func (e *GraphExec) live() error {
	if e == nil {
		return &Error{Op: "cuGraphExec", Result: ErrorInvalidValue, Detail: "nil graph exec"}
	}
	if e.destroyed.Load() {
		return ErrDestroyed
	}
	return nil
}

// Upload uploads the executable's device resources ahead of its first launch, on s.
func (e *GraphExec) Upload(s *Stream) error {
	if err := e.live(); err != nil {
		return err
	}
	if err := s.live(); err != nil {
		return err
	}
	return e.ctx.note(e.ctx.b.GraphUpload(e.raw, s.raw))
}

// Launch queues one replay of the graph on s. It allocates nothing.
func (e *GraphExec) Launch(s *Stream) error {
	if err := e.live(); err != nil {
		return err
	}
	if err := s.live(); err != nil {
		return err
	}
	return e.ctx.note(e.ctx.b.GraphLaunch(e.raw, s.raw))
}

// Update updates e in place to run g (cuGraphExecUpdate), which is much cheaper than a new
// instantiation. It returns false, nil when the driver refuses because the topology differs;
// e is then unchanged and the caller instantiates g instead.
func (e *GraphExec) Update(g *Graph) (bool, error) {
	if err := e.live(); err != nil {
		return false, err
	}
	if err := g.live(); err != nil {
		return false, err
	}
	err := e.ctx.b.GraphExecUpdate(e.raw, g.raw)
	if err == nil {
		return true, nil
	}
	if ResultOf(err) == ErrorGraphExecUpdateFailure {
		return false, nil
	}
	return false, e.ctx.note(err)
}

// Destroy destroys the executable; a second call returns ErrDestroyed.
func (e *GraphExec) Destroy() error {
	if e == nil {
		return nil
	}
	if !e.destroyed.CompareAndSwap(false, true) {
		return ErrDestroyed
	}
	if err := e.ctx.b.GraphExecDestroy(e.raw); err != nil {
		return e.ctx.note(err)
	}
	e.ctx.count.execsDestroyed.Add(1)
	return nil
}
