package partition

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

// runCall is a host's run: its inputs as they are, and outputs allocated by outputs.
type runCall struct {
	ins     []Tensor
	outputs func(infos []ep.TensorInfo) ([]Tensor, error)
}

func (c runCall) Inputs() ([]Tensor, *ep.Provider, error)         { return c.ins, nil, nil }
func (c runCall) Outputs(infos []ep.TensorInfo) ([]Tensor, error) { return c.outputs(infos) }

// decoderWeights are the values of fuzzGraph's graphs a decoder holds as initializers: the
// norms' scales and the projection matrices.
var decoderWeights = []string{"w0", "w1", "m64", "m32a", "m32b"}

// TestRunComputesWhatTheNodesCompute drives partitions without any host but this test: the
// decoder-like graphs of FuzzFuse's seeds (RMSNorms into projections, a residual stream, gated
// SiLU, rotations, cache updates and attention over the cache, one decode position), their
// scales and matrices as initializers, compiled by Session.Compile and run by Partition.Run
// three times, with the inputs and outputs in host memory or in device memory the session's
// Memory knows, with fusion and CUDA graphs on and off. Every run makes what the nodes compute
// one by one; with device tensors the runs read and write them in place, and with CUDA graphs
// the later runs replay.
func TestRunComputesWhatTheNodesCompute(t *testing.T) {
	seeds := [][]byte{
		{0, 0, 0, 4, 0, 0, 4, 4, 0, 1, 0, 4},
		{1, 0, 1, 0, 2, 0, 4, 0, 0, 5, 3, 6, 2, 4, 0, 0, 9},
		{2, 0, 0, 0, 1, 2, 0, 1, 0, 0, 1, 6, 0, 5, 0, 6, 0, 1, 1, 5, 4, 3, 5, 0},
	}
	p := newProvider(t)
	for si, prog := range seeds {
		g, keep := fuzzGraph(t, p, prog, 1)
		data := g.randomData()
		ref := runAll(t, p, g.nodes, data, keep)
		graph := Graph{Name: fmt.Sprintf("decoder%d", si), Nodes: g.nodes, Outputs: keep}
		// The graph's constants are initializers too, as in an ONNX model.
		consts := map[string]bool{}
		for _, n := range g.nodes {
			for _, v := range n.Inputs {
				if c := v.Const; c != nil && !consts[v.Name] {
					consts[v.Name] = true
					vals := c.Floats
					for _, x := range c.Ints {
						vals = append(vals, float64(x))
					}
					graph.Initializers = append(graph.Initializers, Initializer{Name: v.Name, Info: v.Info, Data: encode(v.Info.DType, vals)})
				}
			}
		}
		for _, in := range g.inputs {
			if slices.Contains(decoderWeights, in.Name) {
				graph.Initializers = append(graph.Initializers, Initializer{Name: in.Name, Info: in.Info, Data: encode(in.Info.DType, data[in.Name])})
			} else {
				graph.Inputs = append(graph.Inputs, in.Name)
			}
		}
		for _, fusion := range []bool{false, true} {
			for _, cudaGraph := range []bool{false, true} {
				for _, onDevice := range []bool{false, true} {
					name := fmt.Sprintf("seed%d/fusion=%v/cuda_graph=%v/device=%v", si, fusion, cudaGraph, onDevice)
					t.Run(name, func(t *testing.T) {
						mem := &Memory{}
						s, err := NewSession(p, Options{CUDAGraph: cudaGraph, Paging: PagingOff, Fusion: fusion}, mem, nil)
						require.NoError(t, err)
						pt, err := s.Compile(graph)
						require.NoError(t, err)
						t.Cleanup(func() { assert.NoError(t, pt.Close()) })
						if fusion {
							assert.Less(t, len(pt.Nodes()), len(g.nodes), "the chains fused")
						}
						h := newRunHost(t, p, mem, onDevice)
						ins := make([]Tensor, len(graph.Inputs))
						for i, name := range graph.Inputs {
							info := g.inputs[slices.IndexFunc(g.inputs, func(v Value) bool { return v.Name == name })].Info
							ins[i] = h.tensor(info, encode(info.DType, data[name]))
						}
						before := Totals()
						var outs []Tensor
						call := runCall{ins: ins, outputs: func(infos []ep.TensorInfo) ([]Tensor, error) {
							if outs == nil {
								for _, info := range infos {
									outs = append(outs, h.tensor(info, make([]byte, info.Bytes())))
								}
							}
							return outs, nil
						}}
						for range 3 {
							require.NoError(t, pt.Run(call))
							for j, name := range keep {
								got := decode(outs[j].Info.DType, h.read(outs[j]))
								want := ref[name]
								require.Len(t, got, len(want), "output %s", name)
								scale := 1.0
								for _, x := range want {
									scale = math.Max(scale, math.Abs(x))
								}
								for i := range want {
									require.InDelta(t, want[i], got[i], 1e-4*scale, "output %s element %d", name, i)
								}
							}
						}
						after := Totals()
						assert.Equal(t, uint64(3), after.Runs-before.Runs)
						if onDevice {
							assert.Positive(t, after.ValuesInPlace-before.ValuesInPlace, "device tensors are read and written in place")
						} else {
							assert.Zero(t, after.ValuesInPlace-before.ValuesInPlace, "host tensors are copied")
						}
						if cudaGraph {
							assert.Equal(t, uint64(1), after.Captures-before.Captures, "one capture for one set of addresses")
							assert.Equal(t, uint64(3), after.Replays-before.Replays)
						} else {
							assert.Zero(t, after.Replays-before.Replays)
						}
					})
				}
			}
		}
	}
}

// runHost makes a run's tensors: in host memory, or in device buffers added to the session's
// Memory, as a host's allocator does.
type runHost struct {
	t        *testing.T
	p        *ep.Provider
	mem      *Memory
	onDevice bool
	bufs     map[unsafe.Pointer]*ep.Buffer
	keep     [][]byte // host tensors' bytes, alive while the runs read them
}

func newRunHost(t *testing.T, p *ep.Provider, mem *Memory, onDevice bool) *runHost {
	return &runHost{t: t, p: p, mem: mem, onDevice: onDevice, bufs: map[unsafe.Pointer]*ep.Buffer{}}
}

// tensor holds b as a tensor of info.
func (h *runHost) tensor(info ep.TensorInfo, b []byte) Tensor {
	h.t.Helper()
	if !h.onDevice {
		b = append(b, 0) // never an empty slice to point at
		h.keep = append(h.keep, b)
		return Tensor{Info: info, Data: unsafe.Pointer(&b[0])}
	}
	buf := alloc(h.t, h.p, uint64(max(len(b), 1)))
	if len(b) > 0 {
		require.NoError(h.t, h.p.CopyToDevice(buf, 0, b))
	}
	a := NewAllocation(buf, uint64(max(len(b), 1)), h.p.Options().DeviceID)
	h.mem.Add(a)
	ptr := devicePointer(a.Base)
	h.bufs[ptr] = buf
	return Tensor{Info: info, Data: ptr, OnDevice: true}
}

// read returns a tensor's bytes.
func (h *runHost) read(t Tensor) []byte {
	h.t.Helper()
	n := t.Info.Bytes()
	if !t.OnDevice {
		return slices.Clone(unsafe.Slice((*byte)(t.Data), n))
	}
	b := make([]byte, n)
	require.NoError(h.t, h.p.CopyToHost(b, h.bufs[t.Data], 0))
	return b
}
