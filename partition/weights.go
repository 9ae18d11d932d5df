package partition

import (
	"errors"
	"fmt"

	"github.com/cudaep/cudaep/ep"
)

// PagingMode says when a partition's external-data weights are paged (streamed to the device
// one layer ahead of compute) rather than kept resident.
type PagingMode string

const (
	// PagingAuto pages the weights when they are over the weight budget.
	PagingAuto PagingMode = "auto"
	// PagingOn always pages external-data weights.
	PagingOn PagingMode = "on"
	// PagingOff never pages: weights over the budget are refused.
	PagingOff PagingMode = "off"
)

// Placement is where a partition's external-data weights live.
type placement int

const (
	// Resident weights are loaded to the device once.
	placeResident placement = iota
	// Paged weights stream through a double buffer at every run.
	placePaged
	// OverBudget weights neither fit the budget nor may be paged: the partition is refused.
	placeOverBudget
)

// placeWeights decides where a partition with extBytes of external-data weights keeps them,
// under mode and a device budget of budget bytes (0 for none).
func placeWeights(mode PagingMode, budget, extBytes uint64) placement {
	switch {
	case extBytes == 0:
		return placeResident
	case mode == PagingOn:
		return placePaged
	case budget == 0 || extBytes <= budget:
		return placeResident
	case mode == PagingOff:
		return placeOverBudget
	}
	return placePaged
}

// nodeWeights are the external-data initializers one node reads (by name), and their bytes.
type nodeWeights struct {
	Node  int
	Names []string
	Bytes uint64
}

// layerAlign is the alignment at which a node's initializers start in a layer shared with the
// nodes before it (the GEMV reads its matrix in 16-byte loads; cuBLAS prefers 256).
const layerAlign = 256

// shareLayers splits groups (in node order) into the groups of each paged layer: consecutive
// groups share a layer while it stays within limit bytes (the largest group's: the slots' size
// anyway) and each group starts at a multiple of layerAlign. A layer pays a fence and a copy's
// fixed costs, which small layers (a decoder's key and value projections, 2 MB) do not amortize.
func shareLayers(groups []nodeWeights, limit uint64) [][]nodeWeights {
	var layers [][]nodeWeights
	var bytes uint64
	for i, g := range groups {
		if i == 0 || bytes+g.Bytes > limit || bytes%layerAlign != 0 {
			layers, bytes = append(layers, nil), 0
		}
		layers[len(layers)-1] = append(layers[len(layers)-1], g)
		bytes += g.Bytes
	}
	return layers
}

// Initializer is a constant of a graph: its bytes in host memory (Data), or a range of an
// external-data file (External).
type Initializer struct {
	Name     string
	Info     ep.TensorInfo
	Data     []byte
	External *External
}

// External is an initializer's range of an external-data file: Path is the file as the host
// resolved and checked it, Location the name the model gives it (for messages).
type External struct {
	Path, Location string
	Offset, Length uint64
}

// weights are a partition's constant initializers: resident ones in device buffers, and, when
// the partition pages, the external-data ones as layers streamed through a double buffer
// during each run. files are the external-data files the partition holds open.
type weights struct {
	resident map[string]tensorBuf
	paged    *pagedWeights
	files    []ep.MappingID
}

// external is an opened external-data initializer: its tensor and its range of the file.
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

// loadWeights loads a partition's constant initializers: in-memory ones are copied from the
// host's bytes once; external-data ones are read from their file through the provider's
// mappings (the host never reads those bytes) and either loaded once, resident, or, when the
// partition pages (Paging on, or auto with the weights over WeightBudget), streamed layer by
// layer through a double buffer during every run, except, under a budget with Paging auto, the
// layers that fit it beside the double buffer, which stay resident (see pageLayers).
func (s *Session) loadWeights(nodes []Node, inits []Initializer) (*weights, error) {
	w := &weights{resident: map[string]tensorBuf{}}
	fail := func(err error) (*weights, error) { return nil, errors.Join(err, w.release(s.p)) }
	exts := map[string]external{}
	var extBytes uint64
	for _, in := range inits {
		if e := in.External; e != nil {
			if e.Length == 0 {
				t, err := s.upload(in.Info, nil) // nothing to read: an empty resident tensor
				if err != nil {
					return fail(fmt.Errorf("initializer %q: %w", in.Name, err))
				}
				w.resident[in.Name] = t
				continue
			}
			id, err := s.p.OpenExternalData(e.Path)
			if err != nil {
				return fail(fmt.Errorf("initializer %q: external data %q: %w", in.Name, e.Location, err))
			}
			w.files = append(w.files, id)
			exts[in.Name] = external{info: in.Info, region: ep.Region{Mapping: id, Offset: e.Offset, Len: e.Length}}
			extBytes += e.Length
			continue
		}
		t, err := s.upload(in.Info, in.Data)
		if err != nil {
			return fail(fmt.Errorf("initializer %q: %w", in.Name, err))
		}
		counters.weightHostBytes.Add(uint64(len(in.Data)))
		w.resident[in.Name] = t
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
func (s *Session) pages(extBytes uint64) (bool, error) {
	switch placeWeights(s.opts.Paging, s.opts.WeightBudget, extBytes) {
	case placePaged:
		return true, nil
	case placeOverBudget:
		return false, fmt.Errorf("%w: the partition's external-data weights take %d bytes, over %s=%d, and %s=off",
			ep.ErrInvalidArgument, extBytes, s.opts.key("weight_budget_bytes"), s.opts.WeightBudget, s.opts.key("paging"))
	}
	return false, nil
}

// loadResident copies an external-data initializer from its file to a new device buffer.
func (s *Session) loadResident(e external) (tensorBuf, error) {
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

// upload copies a tensor's bytes into a new device buffer.
func (s *Session) upload(info ep.TensorInfo, data []byte) (tensorBuf, error) {
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
