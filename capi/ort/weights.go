package ort

/*
#include "shim.h"
*/
import "C"

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/cudaep/cudaep/ep"
	engine "github.com/cudaep/cudaep/partition" // the planning engine; partition here is the adapter's compiled node
)

// weights are a partition's constant initializers: resident ones in device buffers, and, when
// the partition pages, the external-data ones as layers streamed through a double buffer
// during each run. files are the external-data files the partition holds open.
type weights struct {
	resident map[string]tensorBuf
	paged    *pagedWeights
	files    []ep.MappingID
}

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
func (pw *pagedWeights) execute(pl *plan) (err error) {
	n := len(pw.layers)
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
				_ = pw.db.Cancel(tickets[i])
			}
		}
	}()
	prefetch := func() error {
		t, err := pw.db.Prefetch(ep.LayerID(next), pw.layers[next].w)
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
			if view, err = pw.db.Wait(tickets[st.layer]); err != nil {
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
		if err := pw.db.Release(tickets[st.layer]); err != nil {
			return fmt.Errorf("page layer %d: %w", st.layer, err)
		}
		done = st.layer + 1
		b := pw.layers[st.layer].w.Bytes()
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

// external is an external-data initializer: its tensor and its range of an opened file.
type external struct {
	info   ep.TensorInfo
	region ep.Region
}

func (w *weights) release(p *ep.Provider) error {
	var errs []error
	if w.paged != nil {
		errs = append(errs, w.paged.db.Close())
		w.paged = nil
	}
	for _, t := range w.resident {
		errs = append(errs, t.buf.Release())
	}
	w.resident = nil
	errs = append(errs, w.closeFiles(p))
	return errors.Join(errs...)
}

func (w *weights) closeFiles(p *ep.Provider) error {
	var errs []error
	for _, id := range w.files {
		errs = append(errs, p.CloseExternalData(id))
	}
	w.files = nil
	return errors.Join(errs...)
}

// loadWeights loads the constant initializers of a partition's graph: in-memory ones are
// copied from ORT's value once; external-data ones are read by cudaep from their file through
// the provider's mappings (ORT never reads those bytes) and either loaded once, resident, or,
// when the partition pages (option paging=on, or paging=auto with the weights over
// weight_budget_bytes), streamed layer by layer through a double buffer during every run,
// except, under a budget with paging=auto, the layers that fit it beside the double buffer,
// which stay resident (see pageLayers).
func (s *session) loadWeights(g *C.OrtGraph, nodes []engine.Node) (*weights, error) {
	var cpath *C.char
	if err := errorOf(C.cudaep_ort_graph_model_path(g, &cpath), "read the model path"); err != nil {
		return nil, err
	}
	modelPath := goString(cpath)
	var arr **C.OrtValueInfo
	var n C.size_t
	if err := errorOf(C.cudaep_ort_graph_initializers(g, &arr, &n), "list the initializers"); err != nil {
		C.cudaep_ort_free_array(unsafe.Pointer(arr))
		return nil, err
	}
	defer C.cudaep_ort_free_array(unsafe.Pointer(arr))
	w := &weights{resident: map[string]tensorBuf{}}
	fail := func(err error) (*weights, error) { return nil, errors.Join(err, w.release(s.p)) }
	exts := map[string]external{}
	var extBytes uint64
	for _, vi := range unsafe.Slice(arr, int(n)) {
		v, err := readValueInfo(vi)
		if err != nil {
			return fail(err)
		}
		ext, data, err := s.initializer(vi, v, modelPath, w)
		if err != nil {
			return fail(fmt.Errorf("initializer %q: %w", v.name, err))
		}
		if ext != nil {
			exts[v.name] = *ext
			extBytes += ext.region.Len
			continue
		}
		t, err := s.upload(v, data)
		if err != nil {
			return fail(fmt.Errorf("initializer %q: %w", v.name, err))
		}
		counters.weightOrtBytes.Add(uint64(len(data)))
		w.resident[v.name] = t
	}
	paged, err := s.pages(extBytes)
	if err != nil {
		return fail(err)
	}
	if !paged {
		for name, e := range exts {
			t, err := s.loadResident(e)
			if err != nil {
				return fail(fmt.Errorf("initializer %q: %w", name, err))
			}
			w.resident[name] = t
		}
		// Every byte is on the device: the files are not needed any more.
		if err := w.closeFiles(s.p); err != nil {
			return fail(err)
		}
		return w, nil
	}
	if w.paged, err = s.pageLayers(nodes, exts, w); err != nil {
		return fail(err)
	}
	if w.paged == nil { // every layer fit the budget
		if err := w.closeFiles(s.p); err != nil {
			return fail(err)
		}
	}
	return w, nil
}

// pages decides whether a partition with extBytes of external-data weights pages them; a
// partition over the budget with paging off is refused, naming both options.
func (s *session) pages(extBytes uint64) (bool, error) {
	switch engine.PlaceWeights(engine.PagingMode(s.opts.paging), s.opts.weightBytes, extBytes) {
	case engine.Paged:
		return true, nil
	case engine.OverBudget:
		return false, fmt.Errorf("%w: the partition's external-data weights take %d bytes, over %sweight_budget_bytes=%d, and %spaging=off",
			ep.ErrInvalidArgument, extBytes, optionPrefix, s.opts.weightBytes, optionPrefix)
	}
	return false, nil
}

// loadResident copies an external-data initializer from its file to a new device buffer.
func (s *session) loadResident(e external) (tensorBuf, error) {
	lw, err := s.p.NewByteWeight([]ep.Region{e.region})
	if err != nil {
		return tensorBuf{}, err
	}
	b, err := s.p.LoadWeight(lw)
	if err != nil {
		return tensorBuf{}, err
	}
	counters.weightFileBytes.Add(e.region.Len)
	return tensorBuf{info: e.info, buf: b}, nil
}

// pageLayers groups a paging partition's external-data initializers into layers of the
// nodes that read them (consecutive nodes share one while it stays within the largest node's
// bytes) and makes the double buffer for the largest layer. With a
// weight_budget_bytes it keeps what fits resident: layers are taken largest first while the
// resident bytes and the double buffer's two slots (twice the largest layer left to page)
// stay within the budget; the rest is paged at every run. With paging=on, or no budget, every
// layer is paged.
func (s *session) pageLayers(nodes []engine.Node, exts map[string]external, w *weights) (*pagedWeights, error) {
	if s.opts.cudaGraph {
		return nil, fmt.Errorf("%w: the partition pages its weights (%spaging=%s, %sweight_budget_bytes=%d), and a CUDA graph needs them resident: set %senable_cuda_graph=0 or raise the budget",
			ep.ErrUnsupported, optionPrefix, s.opts.paging, optionPrefix, s.opts.weightBytes, optionPrefix)
	}
	var groups []engine.NodeWeights
	for i, nd := range nodes {
		g := engine.NodeWeights{Node: i}
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
	if budget := s.opts.weightBytes; budget > 0 && s.opts.paging != "on" {
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
	var paged []engine.NodeWeights
	var largest uint64
	largestNode := ""
	for _, g := range groups {
		p := engine.NodeWeights{Node: g.Node}
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
	pw := &pagedWeights{infos: map[string]ep.TensorInfo{}}
	for _, cur := range engine.ShareLayers(paged, largest) {
		l := layer{offsets: map[string]uint64{}}
		var regions []ep.Region
		var off uint64
		for _, g := range cur {
			l.nodes = append(l.nodes, g.Node)
			for _, name := range g.Names {
				l.offsets[name] = off
				regions = append(regions, exts[name].region)
				pw.infos[name] = exts[name].info
				off += exts[name].region.Len
			}
		}
		lw, err := s.p.NewByteWeight(regions)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", nodes[cur[0].Node].Name, err)
		}
		l.w = lw
		pw.layers = append(pw.layers, l)
	}
	if len(pw.layers) == 0 {
		return nil, nil // everything fit
	}
	if budget := s.opts.weightBytes; budget > 0 && largest > budget/ep.DoubleBufferSlots {
		return nil, fmt.Errorf("%w: node %s reads %d bytes of weights; paging holds two such layers, over %sweight_budget_bytes=%d",
			ep.ErrInvalidArgument, largestNode, largest, optionPrefix, budget)
	}
	db, err := s.p.NewDoubleBuffer(largest, ep.ModeZeroCopy)
	if err != nil {
		return nil, fmt.Errorf("paging the partition's weights: %w", err)
	}
	pw.db = db
	return pw, nil
}

// upload copies a tensor's bytes into a new device buffer.
func (s *session) upload(v value, data []byte) (tensorBuf, error) {
	info := v.info(0)
	size := uint64(len(data))
	if size == 0 {
		size = 1 // an empty tensor still needs an address
	}
	b, err := s.p.Alloc(size, 0)
	if err != nil {
		return tensorBuf{}, err
	}
	if len(data) > 0 {
		if err := s.p.CopyToDevice(b, 0, data); err != nil {
			_ = b.Release()
			return tensorBuf{}, err
		}
	}
	return tensorBuf{info: info, buf: b}, nil
}

// initializer reads a constant initializer checked against its type: an external-data one as
// its range of the file, opened through the provider (recorded in w.files); an in-memory one as
// ORT's bytes.
func (s *session) initializer(vi *C.OrtValueInfo, v value, modelPath string, w *weights) (*external, []byte, error) {
	if !v.tensor {
		return nil, nil, fmt.Errorf("%w: not a tensor", errInvalid)
	}
	want, ok := byteSize(v)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s%v has no fixed byte size", ep.ErrUnsupported, v.dtype, v.shape)
	}
	var path *C.char
	var offset C.int64_t
	var size C.size_t
	var found C.int
	var ext *C.OrtExternalInitializerInfo
	if err := errorOf(C.cudaep_ort_value_info_external(vi, &path, &offset, &size, &found, &ext), "read external data info"); err != nil {
		return nil, nil, err
	}
	if found != 0 {
		loc, off := goString(path), int64(offset)
		C.cudaep_ort_release_external(ext)
		n, err := externalLength(uint64(size), want)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: external data %q: %w (the tensor is %s%v)", errInvalid, loc, err, v.dtype, v.shape)
		}
		resolved, err := checkExternal(modelPath, loc, off, n)
		if err != nil {
			return nil, nil, fmt.Errorf("%w (the tensor %s%v needs %d bytes)", err, v.dtype, v.shape, want)
		}
		if n == 0 {
			return nil, nil, nil // nothing to read: an empty resident tensor
		}
		id, err := s.p.OpenExternalData(resolved)
		if err != nil {
			return nil, nil, fmt.Errorf("external data %q: %w", loc, err)
		}
		w.files = append(w.files, id)
		return &external{info: v.info(0), region: ep.Region{Mapping: id, Offset: uint64(off), Len: n}}, nil, nil
	}
	var data unsafe.Pointer
	var bytes C.size_t
	if err := errorOf(C.cudaep_ort_value_info_data(vi, &data, &bytes), "read an initializer"); err != nil {
		return nil, nil, err
	}
	if data == nil && want > 0 {
		return nil, nil, fmt.Errorf("%w: ORT gave no value for it", errInvalid)
	}
	if uint64(bytes) != want {
		return nil, nil, fmt.Errorf("%w: ORT's value holds %d bytes, the tensor %s%v needs %d", errInvalid, uint64(bytes), v.dtype, v.shape, want)
	}
	if want == 0 {
		return nil, nil, nil
	}
	return nil, C.GoBytes(data, C.int(want)), nil
}

// externalLength is the byte length of an external-data entry whose length field ORT reports as
// length, for a tensor of want bytes. ONNX makes the length optional: without one the tensor's
// size from offset is meant, and ORT reports a missing length as 0, so 0 means want (an entry
// that says 0 for a non-empty tensor names the same bytes as ORT's CPU EP reads). Any other
// length must be the tensor's size.
func externalLength(length, want uint64) (uint64, error) {
	if length == 0 || length == want {
		return want, nil
	}
	return 0, fmt.Errorf("its length is %d bytes, the tensor needs %d", length, want)
}

// byteSize is the byte size of a tensor of static shape.
func byteSize(v value) (uint64, bool) {
	n := elementCount(v.shape)
	es := v.dtype.Size()
	if n < 0 || es == 0 || uint64(n) > (1<<62)/uint64(es) {
		return 0, false
	}
	return uint64(n) * uint64(es), true
}

// errOutside refuses an external-data location a model may not name.
var errOutside = errors.New("external data location outside the model's directory")

// checkExternal checks the external-data file loc names for n bytes at off and returns its
// resolved path, refusing what ORT's own loader refuses: a model loaded from bytes (no
// directory), an absolute location, one that escapes the model's directory (.., or a symlink
// out of it), something other than a regular file, and a range past the file's end.
func checkExternal(modelPath, loc string, off int64, n uint64) (string, error) {
	if modelPath == "" {
		return "", fmt.Errorf("%w: external data %q of a model loaded from bytes: load the model from its file", errInvalid, loc)
	}
	if loc == "" || filepath.IsAbs(loc) || strings.HasPrefix(loc, "/") {
		return "", fmt.Errorf("%w: %w: %q is absolute", errInvalid, errOutside, loc)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(modelPath))
	if err != nil {
		return "", fmt.Errorf("%w: the model's directory: %w", errInvalid, err)
	}
	clean := filepath.Clean(filepath.Join(dir, loc))
	resolved, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return "", fmt.Errorf("external data %q: %w", loc, err)
	}
	if rel, err := filepath.Rel(dir, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %w: %q resolves to %s", errInvalid, errOutside, loc, resolved)
	}
	st, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("external data %q: %w", loc, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: external data %q is not a regular file", errInvalid, loc)
	}
	if off < 0 || uint64(off) > uint64(st.Size()) || n > uint64(st.Size())-uint64(off) {
		return "", fmt.Errorf("%w: external data %q: %d bytes at offset %d pass the end of the %d-byte file", errInvalid, loc, n, off, st.Size())
	}
	return resolved, nil
}
