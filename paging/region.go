package paging

import (
	"fmt"
	"math/bits"
)

// MappingID identifies one memory-mapped external-data file within a [RegionSource].
type MappingID uint64

// Region is a byte range of one external-data file: Len bytes at Offset of the file that
// Mapping identifies.
type Region struct {
	Mapping MappingID // the file
	Offset  uint64    // first byte, from the start of the file
	Len     uint64    // bytes
}

// End returns Offset+Len and whether that sum fits in 64 bits.
func (r Region) End() (uint64, bool) {
	end, carry := bits.Add64(r.Offset, r.Len, 0)
	return end, carry == 0
}

// RegionSource resolves regions to host bytes. Implementations must be safe for concurrent
// use; the bytes returned stay valid, and unchanged, until their file or the source is closed.
type RegionSource interface {
	// RegionBytes returns exactly r.Len bytes of the region, or an error (typically a
	// *RegionError) when the mapping is unknown or the range is out of bounds.
	RegionBytes(r Region) ([]byte, error)
}

// MappingSource is a RegionSource whose regions are slices of whole, page-aligned file
// mappings. The zero-copy transfer registers page-aligned extents of these mappings with the
// driver; a source that is not a MappingSource is always staged.
type MappingSource interface {
	RegionSource
	// Mapping returns the whole mapping of id. Its first byte is page-aligned and its length
	// is the file size rounded up to the page size; the bytes past the file size read as zero.
	// RegionBytes(r) is Mapping(r.Mapping)[r.Offset : r.Offset+r.Len].
	Mapping(id MappingID) ([]byte, error)
}

// Preparer is implemented by sources that can check a layer's regions against the files
// before any device work (a truncated file is reported here, not as a fault mid-copy) and
// hint the kernel to read them ahead.
type Preparer interface {
	// Prepare verifies that every region is still backed by its file and advises the kernel
	// that the regions will be read soon, sequentially.
	Prepare(regions []Region) error
}

// RegionError is a region that cannot be read: an unknown mapping, an offset+length that
// overflows, or a range past the end of the file.
type RegionError struct {
	Mapping  MappingID // the mapping the region names
	Path     string    // the file, when known
	Offset   uint64    // the region's offset
	Len      uint64    // the region's length
	FileSize uint64    // the file's size, when the mapping is known
	Reason   string    // "unknown mapping", "offset+length overflows", "past end of file", …
}

// Error names the mapping, file, offset, length and file size.
func (e *RegionError) Error() string {
	name := fmt.Sprintf("mapping %d", e.Mapping)
	if e.Path != "" {
		name += " (" + e.Path + ")"
	}
	return fmt.Sprintf("paging: %s: region at offset %d, length %d, file size %d: %s",
		name, e.Offset, e.Len, e.FileSize, e.Reason)
}

// Segment is one region's resolved bytes and where they land in the device image.
type Segment struct {
	Region    Region // the region resolved
	DstOffset uint64 // offset in the device image (and in the slot)
	Src       []byte // the region's bytes, as the source returned them; read-only
}

// resolveSegments resolves every region of w through src, in order, so that any bad region
// is reported before a slot is claimed or any device work is queued.
func resolveSegments(w *LazyWeight, src RegionSource) ([]Segment, error) {
	if p, ok := src.(Preparer); ok {
		if err := p.Prepare(w.regions); err != nil {
			return nil, err
		}
	}
	segs := make([]Segment, 0, len(w.regions))
	var off uint64
	for _, r := range w.regions {
		b, err := src.RegionBytes(r)
		if err != nil {
			return nil, err
		}
		if uint64(len(b)) != r.Len {
			return nil, &RegionError{Mapping: r.Mapping, Offset: r.Offset, Len: r.Len,
				Reason: fmt.Sprintf("source returned %d bytes", len(b))}
		}
		segs = append(segs, Segment{Region: r, DstOffset: off, Src: b})
		off += r.Len
	}
	return segs, nil
}
