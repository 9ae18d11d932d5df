package ep

import (
	"errors"
	"fmt"

	"github.com/cudaep/cudaep/paging"
)

// NewByteWeight returns a lazy weight whose image is the concatenation of regions of the
// provider's opened external-data files, typed as bytes and consumed by dense kernels: the form
// a front end uses to move several tensors of one operator (a Gemm's B and C, say) as one layer.
// Order the regions so that each tensor starts at a multiple of its element size in the image
// (largest element size first does it, since every tensor's size is a multiple of its own).
//
// # Errors
//
// No regions, an empty region, or a region outside its file (an error naming the file, the
// range and the file's size).
func (p *Provider) NewByteWeight(regions []Region) (*LazyWeight, error) {
	if len(regions) == 0 {
		return nil, fmt.Errorf("%w: ep: a byte weight needs at least one region", ErrInvalidArgument)
	}
	var total uint64
	for i, r := range regions {
		if r.Len == 0 {
			return nil, fmt.Errorf("%w: ep: region %d of a byte weight is empty", ErrInvalidArgument, i)
		}
		if total+r.Len < total {
			return nil, fmt.Errorf("%w: ep: a byte weight's regions overflow 64 bits", ErrInvalidArgument)
		}
		total += r.Len
	}
	return p.NewLazyWeight(WeightSpec{
		Boundary: paging.BoundaryMatMul, DType: paging.Uint8, Shape: []int64{int64(total)}, Regions: regions,
	})
}

// LoadWeight copies w's image, read from the provider's opened external-data files, into a new
// device buffer: the weight becomes resident and no longer needs its files (close them when
// nothing else pages from them). The copies are ordered on the provider's stream like
// CopyToDevice's. The caller owns the buffer.
//
// # Errors
//
// A nil weight, a region whose file was closed, the provider's Alloc and CopyToDevice errors.
// Nothing is left allocated on an error.
func (p *Provider) LoadWeight(w *LazyWeight) (*Buffer, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: ep: load a nil weight", ErrInvalidArgument)
	}
	if p.closed.Load() {
		return nil, ErrClosed
	}
	size := w.Bytes()
	if size == 0 {
		size = 1 // an empty tensor still needs an address
	}
	b, err := p.Alloc(size, 0)
	if err != nil {
		return nil, err
	}
	var off uint64
	for _, r := range w.Regions() {
		data, err := p.weights.files.RegionBytes(r)
		if err == nil {
			err = p.CopyToDevice(b, off, data)
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("ep: load weight: %w", err), b.Release())
		}
		off += r.Len
	}
	return b, nil
}
