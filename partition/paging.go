package partition

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cudaep/cudaep/ep"
)

// pagedWeights are a paging partition's layers (the external-data initializers of one or more
// consecutive nodes, in the partition's node order) and the double buffer they stream through.
type pagedWeights struct {
	db     *ep.DoubleBuffer
	layers []layer
	infos  map[string]ep.TensorInfo // the paged initializers' tensors
}

// layer is the external-data initializers of consecutive nodes as one image: the nodes'
// indices in the partition and each initializer's byte offset in the image.
type layer struct {
	w       *ep.LazyWeight
	nodes   []int
	offsets map[string]uint64
}

// execute runs a plan of a paging partition. Two layers are in flight ahead of compute; the
// first step that reads a layer fences the compute stream on its copy (the host does not
// wait), the layer's steps read their inputs from the slot, and the last one releases the slot
// once its kernel is queued, so that the slot takes the layer after next. On an error the
// layers still held are cancelled.
func (paged *pagedWeights) execute(pl *plan) (err error) {
	n := len(paged.layers)
	tickets := make([]ep.Ticket, n)
	left := make([]int, n) // each layer's steps not yet queued
	for _, st := range pl.steps {
		if st.layer >= 0 {
			left[st.layer]++
		}
	}
	next, done := 0, 0
	defer func() {
		if err != nil {
			for i := done; i < next; i++ {
				_ = paged.db.Cancel(tickets[i])
			}
		}
	}()
	prefetch := func() error {
		t, err := paged.db.Prefetch(ep.LayerID(next), paged.layers[next].w)
		if err != nil {
			return fmt.Errorf("page layer %d: %w", next, err)
		}
		tickets[next] = t
		next++
		return nil
	}
	for next < n && next < ep.DoubleBufferSlots {
		if err := prefetch(); err != nil {
			return err
		}
	}
	var view ep.SlotView
	held := -1 // the layer whose slot view the steps read
	for _, st := range pl.steps {
		if st.layer >= 0 && st.layer != held {
			if view, err = paged.db.Wait(tickets[st.layer]); err != nil {
				return fmt.Errorf("page layer %d: %w", st.layer, err)
			}
			held = st.layer
		}
		for _, pa := range st.patches {
			st.ins[pa.arg].Ptr = view.Ptr + ep.DevicePtr(pa.off)
		}
		if err := st.k.Execute(st.ins, st.out); err != nil {
			return err
		}
		if st.layer < 0 {
			continue
		}
		if left[st.layer]--; left[st.layer] > 0 {
			continue
		}
		if err := paged.db.Release(tickets[st.layer]); err != nil {
			return fmt.Errorf("page layer %d: %w", st.layer, err)
		}
		done = st.layer + 1
		b := paged.layers[st.layer].w.Bytes()
		counters.pagedLayers.Add(1)
		counters.pagedBytes.Add(b)
		counters.weightFileBytes.Add(b)
		if next < n {
			if err := prefetch(); err != nil {
				return err
			}
		}
	}
	return nil
}

// pageLayers groups a paging partition's external-data initializers into layers of the
// nodes that read them (consecutive nodes share one while it stays within the largest node's
// bytes) and makes the double buffer for the largest layer. With a
// weight_budget_bytes it keeps what fits resident: layers are taken largest first while the
// resident bytes and the double buffer's two slots (twice the largest layer left to page)
// stay within the budget; the rest is paged at every run. With paging=on, or no budget, every
// layer is paged.
func (s *Session) pageLayers(nodes []Node, exts map[string]external, w *weights) (*pagedWeights, error) {
	if s.opts.CUDAGraph {
		return nil, fmt.Errorf("%w: the partition pages its weights (%s=%s, %s=%d), and a CUDA graph needs them resident: set %s=0 or raise the budget",
			ep.ErrUnsupported, s.opts.key("paging"), s.opts.Paging, s.opts.key("weight_budget_bytes"), s.opts.WeightBudget, s.opts.key("enable_cuda_graph"))
	}
	var groups []nodeWeights
	for i, nd := range nodes {
		g := nodeWeights{Node: i}
		for _, v := range nd.Inputs {
			if e, ok := exts[v.Name]; ok && !slices.Contains(g.Names, v.Name) {
				g.Names = append(g.Names, v.Name)
				g.Bytes += e.region.Len
			}
		}
		if len(g.Names) > 0 {
			groups = append(groups, g)
		}
	}
	resident := map[string]bool{}
	if budget := s.opts.WeightBudget; budget > 0 && s.opts.Paging != PagingOn {
		order := make([]int, len(groups))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(groups[b].Bytes, groups[a].Bytes) })
		kept := make([]bool, len(groups))
		var held uint64
		for _, gi := range order {
			var extra uint64
			for _, name := range groups[gi].Names {
				if !resident[name] {
					extra += exts[name].region.Len
				}
			}
			var slot uint64 // the largest layer still paged if this one is not
			for _, gj := range order {
				if gj != gi && !kept[gj] {
					slot = groups[gj].Bytes
					break
				}
			}
			if held+extra+ep.DoubleBufferSlots*slot > budget {
				continue
			}
			kept[gi], held = true, held+extra
			for _, name := range groups[gi].Names {
				if !resident[name] {
					t, err := s.loadResident(exts[name])
					if err != nil {
						return nil, fmt.Errorf("initializer %q: %w", name, err)
					}
					w.resident[name], resident[name] = t, true
				}
			}
		}
	}
	// The groups still paged, each with its initializers, largest elements first (every tensor
	// then starts at a multiple of its element size).
	var paged []nodeWeights
	var largest uint64
	largestNode := ""
	for _, g := range groups {
		p := nodeWeights{Node: g.Node}
		for _, name := range g.Names {
			if !resident[name] {
				p.Names = append(p.Names, name)
				p.Bytes += exts[name].region.Len
			}
		}
		if len(p.Names) == 0 {
			continue
		}
		slices.SortStableFunc(p.Names, func(a, b string) int {
			return exts[b].info.DType.Size() - exts[a].info.DType.Size()
		})
		paged = append(paged, p)
		if p.Bytes > largest {
			largest, largestNode = p.Bytes, nodes[g.Node].Name
		}
	}
	out := &pagedWeights{infos: map[string]ep.TensorInfo{}}
	for _, cur := range shareLayers(paged, largest) {
		l := layer{offsets: map[string]uint64{}}
		var regions []ep.Region
		var off uint64
		for _, g := range cur {
			l.nodes = append(l.nodes, g.Node)
			for _, name := range g.Names {
				l.offsets[name] = off
				regions = append(regions, exts[name].region)
				out.infos[name] = exts[name].info
				off += exts[name].region.Len
			}
		}
		lw, err := s.p.NewByteWeight(regions)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", nodes[cur[0].Node].Name, err)
		}
		l.w = lw
		out.layers = append(out.layers, l)
	}
	if len(out.layers) == 0 {
		return nil, nil // everything fit
	}
	if budget := s.opts.WeightBudget; budget > 0 && largest > budget/ep.DoubleBufferSlots {
		return nil, fmt.Errorf("%w: node %s reads %d bytes of weights; paging holds two such layers, over %s=%d",
			ep.ErrInvalidArgument, largestNode, largest, s.opts.key("weight_budget_bytes"), budget)
	}
	db, err := s.p.NewDoubleBuffer(largest, ep.ModeZeroCopy)
	if err != nil {
		return nil, fmt.Errorf("paging the partition's weights: %w", err)
	}
	out.db = db
	return out, nil
}
