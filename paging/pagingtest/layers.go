package pagingtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cudaep/cudaep/paging"
)

// PrefixByte fills a LayerFile's prefix: it differs from every pattern byte's neighbourhood so
// that an image shifted into the prefix fails a byte-identity check.
const PrefixByte = 0xAB

// PatternByte is byte i of region idx (counted from 1 across the file) of a file salted with
// salt: never zero, and different across regions, offsets and salts, so that a short, shifted,
// misordered, zero or foreign copy fails a byte-identity check. It repeats every 255 bytes.
func PatternByte(idx, i int, salt byte) byte {
	return byte((i*31+idx*17+int(salt)*101)%255) + 1
}

// patternPeriod is PatternByte's period in i.
const patternPeriod = 255

// LayerFile describes an external-data file of whole-layer weights: Prefix bytes of
// PrefixByte, then Layers layers of RegionsPerLayer back-to-back regions of RegionBytes each,
// region idx (from 1) holding PatternByte(idx, i, Salt) at its byte i. Every layer is one
// BlockQuantizedMoe uint8 weight whose image is its regions in order.
type LayerFile struct {
	Prefix          int  // bytes before the first layer (non-zero keeps regions off offset 0)
	RegionBytes     int  // bytes per region
	RegionsPerLayer int  // regions per layer
	Layers          int  // layers
	Salt            byte // varies the patterns, to tell two files' bytes apart
}

func (f LayerFile) check() error {
	if f.Prefix < 0 || f.RegionBytes <= 0 || f.RegionsPerLayer <= 0 || f.Layers <= 0 {
		return fmt.Errorf("pagingtest: layer file needs a non-negative prefix and positive sizes, got %+v", f)
	}
	return nil
}

// LayerBytes is the image size of one layer.
func (f LayerFile) LayerBytes() uint64 { return uint64(f.RegionBytes) * uint64(f.RegionsPerLayer) }

// Size is the file's size in bytes.
func (f LayerFile) Size() uint64 { return uint64(f.Prefix) + f.LayerBytes()*uint64(f.Layers) }

// WriteTo writes the file's bytes to w (it implements io.WriterTo).
func (f LayerFile) WriteTo(w io.Writer) (int64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var n int64
	write := func(b []byte) error {
		m, err := bw.Write(b)
		n += int64(m)
		return err
	}
	pad := make([]byte, f.Prefix)
	for i := range pad {
		pad[i] = PrefixByte
	}
	if err := write(pad); err != nil {
		return n, err
	}
	// The pattern repeats every patternPeriod bytes: build one chunk of whole periods per
	// region and write it as many times as the region needs.
	chunk := make([]byte, min(f.RegionBytes, patternPeriod*4096))
	for idx := 1; idx <= f.Layers*f.RegionsPerLayer; idx++ {
		for i := range chunk {
			chunk[i] = PatternByte(idx, i, f.Salt)
		}
		for left := f.RegionBytes; left > 0; left -= len(chunk) {
			if err := write(chunk[:min(left, len(chunk))]); err != nil {
				return n, err
			}
		}
	}
	return n, bw.Flush()
}

// Create writes the file at path, replacing any file there.
func (f LayerFile) Create(path string) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("pagingtest: %w", err)
	}
	if _, err := f.WriteTo(out); err != nil {
		return errors.Join(fmt.Errorf("pagingtest: write %s: %w", path, err), out.Close())
	}
	return out.Close()
}

// Specs returns the layers' weight specs, their regions naming mapping id.
func (f LayerFile) Specs(id paging.MappingID) []paging.WeightSpec {
	specs := make([]paging.WeightSpec, 0, f.Layers)
	off := uint64(f.Prefix)
	for range f.Layers {
		spec := paging.WeightSpec{
			Boundary: paging.BoundaryBlockQuantizedMoe,
			DType:    paging.Uint8,
			Shape:    []int64{int64(f.LayerBytes())},
		}
		for range f.RegionsPerLayer {
			spec.Regions = append(spec.Regions, paging.Region{Mapping: id, Offset: off, Len: uint64(f.RegionBytes)})
			off += uint64(f.RegionBytes)
		}
		specs = append(specs, spec)
	}
	return specs
}

// Weights returns the layers' lazy weights, their regions naming mapping id.
func (f LayerFile) Weights(id paging.MappingID) ([]*paging.LazyWeight, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	var ws []*paging.LazyWeight
	for _, spec := range f.Specs(id) {
		w, err := paging.NewLazyWeight(spec)
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// Layers is a layer file mapped in a source of its own.
type Layers struct {
	File    LayerFile
	Path    string
	Source  *paging.MmapSource // owned: Close closes it
	ID      paging.MappingID   // the file's mapping in Source
	Weights []*paging.LazyWeight
}

// Open maps the layer file f already written at path in a new MmapSource and returns its
// weights. Close the result to unmap it (the file stays).
func (f LayerFile) Open(path string) (*Layers, error) {
	src := paging.NewMmapSource()
	id, err := src.Open(path)
	if err != nil {
		return nil, errors.Join(err, src.CloseAll())
	}
	if size, err := src.Size(id); err != nil || size != f.Size() {
		return nil, errors.Join(fmt.Errorf("pagingtest: %s holds %d bytes, the layer file %d", path, size, f.Size()), err, src.CloseAll())
	}
	ws, err := f.Weights(id)
	if err != nil {
		return nil, errors.Join(err, src.CloseAll())
	}
	return &Layers{File: f, Path: path, Source: src, ID: id, Weights: ws}, nil
}

// Close unmaps the file (CloseAll on the source).
func (l *Layers) Close() error { return l.Source.CloseAll() }
