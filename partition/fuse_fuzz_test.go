package partition

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/ep"
)

// FuzzFuse feeds Fuse decoder-like graphs that prog writes (fuzzGraph), as a decode step (one
// position) and as a prompt (three): the chains Fuse looks for, over values picked from
// everything made before (chains' intermediates included), so that chains share values,
// intermediates gain other readers, nodes repeat and values are kept. Fuse must leave its
// input untouched and return nodes in topological order that make every kept value with its
// dtype and shape, no more nodes than it got, and the same kept values as the unfused graph
// when both run on the same inputs (float32: within 1e-4 of the larger of 1 and the value's
// largest magnitude).
func FuzzFuse(f *testing.F) {
	// The seeds' fusions as a decode step. An RMSNorm two MatMuls read: cudaep.NormMatMulGroup.
	f.Add([]byte{0, 0, 0, 4, 0, 0, 4, 4, 0, 1, 0, 4})
	// A residual Add normalized into a MatMul, whose output a gated SiLU feeds into another:
	// cudaep.SkipNormMatMulGroup, cudaep.SiluMulMatMulGroup.
	f.Add([]byte{1, 0, 1, 0, 2, 0, 4, 0, 0, 5, 3, 6, 2, 4, 0, 0, 9})
	// A decode step's rotations, cache updates and attention: cudaep.RotateHalfPair,
	// cudaep.WherePair, Attention.
	f.Add([]byte{2, 0, 0, 0, 1, 2, 0, 1, 0, 0, 1, 6, 0, 5, 0, 6, 0, 1, 1, 5, 4, 3, 5, 0})
	// An RMSNorm chain with an intermediate read by a Neg and another kept, and a repeated node:
	// nothing fuses.
	f.Add([]byte{0, 0, 0, 7, 0, 3, 8, 0, 2, 9, 3})
	opts := ep.DefaultOptions()
	opts.Backend = drivertest.BackendName()
	p, err := ep.New(opts)
	require.NoError(f, err)
	f.Cleanup(func() { require.NoError(f, p.Close()) })
	f.Fuzz(func(t *testing.T, prog []byte) {
		for _, seq := range []int64{1, 3} {
			t.Run(fmt.Sprintf("seq%d", seq), func(t *testing.T) { checkFuse(t, p, prog, seq) })
		}
	})
}

// checkFuse fuses the graph prog writes for seq positions and checks what FuzzFuse says.
func checkFuse(t *testing.T, p *ep.Provider, prog []byte, seq int64) {
	g, keep := fuzzGraph(t, p, prog, seq)
	before := cloneNodes(g.nodes)
	fused := Fuse(p, g.nodes, keep)
	require.True(t, reflect.DeepEqual(before, g.nodes), "Fuse modified its input")
	require.LessOrEqual(t, len(fused), len(g.nodes))
	checkTopological(t, g, fused, keep)

	data := g.randomData()
	ref := runAll(t, p, g.nodes, data, keep)
	got := runAll(t, p, fused, data, keep)
	for _, name := range keep {
		want, have := ref[name], got[name]
		require.Len(t, have, len(want), "value %s", name)
		scale := 1.0
		for _, x := range want {
			scale = math.Max(scale, math.Abs(x))
		}
		for i := range want {
			require.InDelta(t, want[i], have[i], 1e-4*scale,
				"value %s element %d (fused: %v)", name, i, ops(fused))
		}
	}
}

// fuzzShapes are the shapes fuzzGraph's values take for seq positions, by pool: the hidden
// rows, their scale, query and key-value heads, cos or sin rows, a cache of 6 positions, its
// position mask, the attention mask, and three weight matrices.
func fuzzShapes(seq int64) map[string][]int64 {
	return map[string][]int64{
		"h": {1, seq, 64}, "w": {64}, "q": {1, 4, seq, 16}, "kv": {1, 2, seq, 16},
		"rot": {1, 1, seq, 16}, "cache": {1, 2, 6, 16}, "pos": {1, 1, 6, 1}, "mask": {1, 1, seq, 6},
		"m64": {64, 64}, "m32": {64, 32},
	}
}

// fuzzGraph writes a float32 graph of seq positions (1: a decode step; more: a prompt) from
// prog, at most 12 steps of an opcode byte and its operand bytes (a missing byte reads as 0),
// each step one of:
//
//	0 RMSNorm chain of h with scale w      5 attention chain of q over two caches and a mask
//	1 Add of two h                         6 cache update: Where(pos > ½, Expand(kv), cache);
//	                                         of seq > 1, Where(pos > ½, cache, cache)
//	2 rotary chain of q or kv (cos, sin)   7 Neg of any value (a reader of an intermediate)
//	3 gated SiLU chain of two h            8 keep a value
//	4 MatMul of h and a matrix             9 repeat an earlier node
//
// Operands pick among every value of the pool's shape made so far, inputs first. It returns the
// builder and the values to keep: those step 8 chose and every value no node reads.
func fuzzGraph(t *testing.T, p *ep.Provider, prog []byte, seq int64) (*graphBuilder, []string) {
	g := newGraph(t, p)
	shapes := fuzzShapes(seq)
	pools := map[string][]Value{}
	for _, in := range []struct{ pool, name string }{
		{"h", "h0"}, {"h", "h1"}, {"w", "w0"}, {"w", "w1"}, {"q", "q"}, {"kv", "k"}, {"kv", "v"},
		{"rot", "cos"}, {"rot", "sin"}, {"cache", "past_k"}, {"cache", "past_v"}, {"pos", "pos"},
		{"mask", "mask"}, {"m64", "m64"}, {"m32", "m32a"}, {"m32", "m32b"},
	} {
		pools[in.pool] = append(pools[in.pool], g.input(in.name, ep.Float32, shapes[in.pool]...))
	}
	r := drivertest.NewFuzzBytes(prog)
	next := r.Next
	pick := func(pool string) Value { vs := pools[pool]; return vs[next()%len(vs)] }
	var kept []string
	for step := 0; step < 12 && !r.Done(); step++ {
		made := len(g.nodes)
		switch next() % 10 {
		case 0:
			rmsNormChain(g, pick("h"), pick("w"))
		case 1:
			g.op("Add", nil, pick("h"), pick("h"))
		case 2:
			x := pick("q")
			if next()%2 == 1 {
				x = pick("kv")
			}
			rotaryChain(g, x, pick("rot"), pick("rot"))
		case 3:
			a := pick("h")
			g.op("Mul", nil, g.op("Mul", nil, a, g.op("Sigmoid", nil, a)), pick("h"))
		case 4:
			m := pick("m64")
			if next()%2 == 1 {
				m = pick("m32")
			}
			g.op("MatMul", nil, pick("h"), m)
		case 5:
			attentionChain(g, pick("q"), pick("cache"), pick("cache"), pick("mask"), 0.25)
		case 6:
			hit := g.op("Greater", nil, pick("pos"), g.floats(ep.Float32, nil, 0.5))
			x := pick("cache")
			if seq == 1 { // a decode step's new row, broadcast over the cache
				x = g.op("Expand", nil, pick("kv"), g.ints(shapes["cache"]...))
			}
			g.op("Where", nil, hit, x, pick("cache"))
		case 7:
			g.op("Neg", nil, pick(fuzzPool(next())))
		case 8:
			kept = append(kept, pick(fuzzPool(next())).Name)
		case 9:
			if len(g.nodes) > 0 {
				n := g.nodes[next()%len(g.nodes)]
				g.op(n.Op, n.Attrs, n.Inputs...)
			}
		}
		for _, n := range g.nodes[made:] {
			for _, v := range n.Outputs {
				for pool, shape := range shapes {
					if v.Info.DType == ep.Float32 && slices.Equal(v.Info.Shape, shape) {
						pools[pool] = append(pools[pool], v)
					}
				}
			}
		}
	}
	read := map[string]bool{}
	for _, n := range g.nodes {
		for _, v := range n.Inputs {
			read[v.Name] = true
		}
	}
	for _, n := range g.nodes {
		for _, v := range n.Outputs {
			if !read[v.Name] {
				kept = append(kept, v.Name)
			}
		}
	}
	// Keep each value once, and only what the nodes make (step 8 may pick a graph input).
	made := map[string]bool{}
	for _, n := range g.nodes {
		for _, v := range n.Outputs {
			made[v.Name] = true
		}
	}
	var keep []string
	for _, name := range kept {
		if made[name] {
			keep = append(keep, name)
			made[name] = false
		}
	}
	return g, keep
}

// fuzzPool names a pool by a byte, in a fixed order.
func fuzzPool(b int) string {
	pools := []string{"h", "w", "q", "kv", "rot", "cache", "pos", "mask", "m64", "m32"}
	return pools[b%len(pools)]
}

// checkTopological checks that every input of fused is a graph input, a constant or the
// output of an earlier node, that no value is made twice, and that every kept value is made
// with the dtype and shape the unfused graph gives it.
func checkTopological(t *testing.T, g *graphBuilder, fused []Node, keep []string) {
	t.Helper()
	known := map[string]ep.TensorInfo{}
	for _, v := range g.inputs {
		known[v.Name] = v.Info
	}
	for _, n := range fused {
		for _, v := range n.Inputs {
			if _, ok := known[v.Name]; !ok && v.Const == nil && v.Name != "" {
				t.Fatalf("node %s (%s) reads %s before any node makes it", n.Name, n.Op, v.Name)
			}
		}
		for _, v := range n.Outputs {
			if _, ok := known[v.Name]; ok && v.Name != "" {
				t.Fatalf("node %s (%s) makes %s again", n.Name, n.Op, v.Name)
			}
			known[v.Name] = v.Info
		}
	}
	want := map[string]ep.TensorInfo{}
	for _, n := range g.nodes {
		for _, v := range n.Outputs {
			want[v.Name] = v.Info
		}
	}
	for _, name := range keep {
		info, ok := known[name]
		require.True(t, ok, "kept value %s is made by no fused node", name)
		require.Equal(t, want[name], info, "kept value %s", name)
	}
}

// cloneNodes copies nodes deeply enough that reflect.DeepEqual tells whether anything
// reachable from them changed.
func cloneNodes(nodes []Node) []Node {
	if nodes == nil {
		return nil
	}
	values := func(vs []Value) []Value {
		out := make([]Value, len(vs))
		for i, v := range vs {
			out[i] = v
			out[i].Info.Shape = slices.Clone(v.Info.Shape)
			if v.Const != nil {
				c := ep.Const{Ints: slices.Clone(v.Const.Ints), Floats: slices.Clone(v.Const.Floats)}
				out[i].Const = &c
			}
		}
		return out
	}
	out := make([]Node, len(nodes))
	for i, n := range nodes {
		out[i] = n
		if n.Attrs != nil {
			out[i].Attrs = map[string]ep.Attribute{}
			for k, a := range n.Attrs {
				out[i].Attrs[k] = a
			}
		}
		out[i].Inputs, out[i].Outputs = values(n.Inputs), values(n.Outputs)
	}
	return out
}
