package paging

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// pageSize is the host page size; mappings and registered extents are aligned to it.
var pageSize = uint64(os.Getpagesize())

func alignDown(v, a uint64) uint64 { return v - v%a }

// alignUp rounds v up to a multiple of a; the caller guarantees no overflow (every value
// rounded here is bounded by a mapping length).
func alignUp(v, a uint64) uint64 {
	if r := v % a; r != 0 {
		return v + a - r
	}
	return v
}

// Advice is a madvise hint about how a range of a mapping will be read.
type Advice int

// The hints Advise accepts.
const (
	// AdviceNormal resets a range to the kernel's default read-ahead.
	AdviceNormal Advice = iota
	// AdviceWillNeed asks the kernel to start reading the range into the page cache now.
	AdviceWillNeed
	// AdviceSequential says the range will be read once, front to back (aggressive
	// read-ahead, pages dropped early behind the reader).
	AdviceSequential
)

func (a Advice) madv() (int, error) {
	switch a {
	case AdviceNormal:
		return unix.MADV_NORMAL, nil
	case AdviceWillNeed:
		return unix.MADV_WILLNEED, nil
	case AdviceSequential:
		return unix.MADV_SEQUENTIAL, nil
	}
	return 0, fmt.Errorf("paging: unknown advice %d", int(a))
}

// TruncatedError reports an external-data file that is now shorter than it was when it was
// mapped: reading the missing pages would fault, so the layer is refused before any copy.
type TruncatedError struct {
	Mapping    MappingID // the mapping
	Path       string    // its file
	MappedSize uint64    // the size when the file was mapped
	Size       uint64    // the size now
}

// Error names the file and both sizes.
func (e *TruncatedError) Error() string {
	return fmt.Sprintf("paging: mapping %d (%s): external-data file truncated from %d to %d bytes after it was mapped",
		e.Mapping, e.Path, e.MappedSize, e.Size)
}

// mappedFile is one file mapped whole, shared and read-only.
type mappedFile struct {
	path string
	file *os.File // kept open to re-check the size (fstat) before each layer
	mem  []byte   // the mapping: file size rounded up to the page size; nil for an empty file
	size uint64   // file size at mapping time
}

// MmapSource maps ONNX external-data files and resolves regions of them. Each file is mapped
// whole with MAP_SHARED and PROT_READ: shared, because the driver may register (page-lock) the
// mapping for zero-copy transfers, and registering a private mapping can hang the machine;
// read-only, because weights are never written.
//
// An MmapSource is safe for concurrent use. Closing it unmaps every file: close it only after
// every pipeline that reads from it has been closed.
type MmapSource struct {
	mu     sync.RWMutex
	files  map[MappingID]*mappedFile
	closed bool
}

var (
	_ MappingSource = (*MmapSource)(nil)
	_ Preparer      = (*MmapSource)(nil)
)

// NewMmapSource returns an empty source; add files with Open.
func NewMmapSource() *MmapSource {
	return &MmapSource{files: map[MappingID]*mappedFile{}}
}

// Open maps the file at path under id.
//
// # Errors
//
// A missing or unreadable file is an error naming the mapping and the path that wraps the
// *os.PathError (errors.Is(err, fs.ErrNotExist) holds for a missing one). An id already in use
// and a closed source are errors too.
func (s *MmapSource) Open(id MappingID, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("paging: external data for mapping %d: %w", id, err)
	}
	mf, err := mapFile(f, path)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("paging: external data for mapping %d: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		err = ErrClosed
	case s.files[id] != nil:
		err = fmt.Errorf("paging: mapping %d is already open (%s)", id, s.files[id].path)
	}
	if err != nil {
		_ = mf.unmap()
		return err
	}
	s.files[id] = mf
	return nil
}

func mapFile(f *os.File, path string) (*mappedFile, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	mf := &mappedFile{path: path, file: f, size: uint64(st.Size())}
	if mf.size == 0 {
		return mf, nil
	}
	length := alignUp(mf.size, pageSize)
	if length > uint64(^uint(0)>>1) {
		return nil, fmt.Errorf("%s: %d bytes is too large to map", path, mf.size)
	}
	// MAP_SHARED, never MAP_PRIVATE: the driver may page-lock this mapping (see MmapSource).
	mem, err := unix.Mmap(int(f.Fd()), 0, int(length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	mf.mem = mem
	return mf, nil
}

func (mf *mappedFile) unmap() error {
	var err error
	if mf.mem != nil {
		err = unix.Munmap(mf.mem)
		mf.mem = nil
	}
	return errors.Join(err, mf.file.Close())
}

func (s *MmapSource) lookup(id MappingID) (*mappedFile, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	mf := s.files[id]
	if mf == nil {
		return nil, &RegionError{Mapping: id, Reason: "unknown mapping"}
	}
	return mf, nil
}

// lookupRegion is lookup for r's mapping, with an unknown mapping reported with r's range.
func (s *MmapSource) lookupRegion(r Region) (*mappedFile, error) {
	mf, err := s.lookup(r.Mapping)
	if re, ok := err.(*RegionError); ok {
		re.Offset, re.Len = r.Offset, r.Len
	}
	return mf, err
}

// check bounds-checks r against the file as it was mapped.
func (mf *mappedFile) check(r Region, size uint64) error {
	end, ok := r.End()
	e := &RegionError{Mapping: r.Mapping, Path: mf.path, Offset: r.Offset, Len: r.Len, FileSize: size}
	switch {
	case !ok:
		e.Reason = "offset+length overflows"
	case end > size:
		e.Reason = fmt.Sprintf("range ends at %d, past the end of the file", end)
	default:
		return nil
	}
	return e
}

// Size returns the size of the file mapped under id, as it was when mapped.
func (s *MmapSource) Size(id MappingID) (uint64, error) {
	mf, err := s.lookup(id)
	if err != nil {
		return 0, err
	}
	return mf.size, nil
}

// Path returns the path of the file mapped under id.
func (s *MmapSource) Path(id MappingID) (string, error) {
	mf, err := s.lookup(id)
	if err != nil {
		return "", err
	}
	return mf.path, nil
}

// RegionBytes returns the region's bytes inside the mapping (no copy). They are read-only:
// writing to them faults.
//
// # Errors
//
// A *RegionError naming the mapping, path, offset, length and file size for an unknown mapping,
// an offset+length that overflows or a range past the end of the file.
func (s *MmapSource) RegionBytes(r Region) ([]byte, error) {
	mf, err := s.lookupRegion(r)
	if err != nil {
		return nil, err
	}
	if err := mf.check(r, mf.size); err != nil {
		return nil, err
	}
	return mf.mem[r.Offset : r.Offset+r.Len : r.Offset+r.Len], nil
}

// Mapping returns the whole mapping of id (see MappingSource). It is nil for an empty file.
func (s *MmapSource) Mapping(id MappingID) ([]byte, error) {
	mf, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	return mf.mem, nil
}

// Prepare checks every region against its file as it is now (a *TruncatedError when the file
// shrank since it was mapped, a *RegionError when a region no longer fits), then advises the
// kernel that the regions will be read soon and sequentially. The advice is a hint: its
// failure is not an error.
func (s *MmapSource) Prepare(regions []Region) error {
	checked := map[MappingID]uint64{}
	for _, r := range regions {
		mf, err := s.lookupRegion(r)
		if err != nil {
			return err
		}
		size, seen := checked[r.Mapping]
		if !seen {
			st, err := mf.file.Stat()
			if err != nil {
				return fmt.Errorf("paging: mapping %d (%s): %w", r.Mapping, mf.path, err)
			}
			size = uint64(st.Size())
			if size < mf.size {
				return &TruncatedError{Mapping: r.Mapping, Path: mf.path, MappedSize: mf.size, Size: size}
			}
			size = mf.size // the mapping covers only what existed when it was made
			checked[r.Mapping] = size
		}
		if err := mf.check(r, size); err != nil {
			return err
		}
	}
	_ = s.Advise(regions, AdviceWillNeed)
	_ = s.Advise(regions, AdviceSequential)
	return nil
}

// Advise applies a to the page-aligned extent of every region, for example AdviceWillNeed on
// the layer about to be paged so that its pages are read in while the current layer computes.
//
// # Errors
//
// A *RegionError for a bad region (nothing is advised then), or the first madvise error.
func (s *MmapSource) Advise(regions []Region, a Advice) error {
	madv, err := a.madv()
	if err != nil {
		return err
	}
	type extent struct {
		mem    []byte
		lo, hi uint64
	}
	extents := make([]extent, 0, len(regions))
	for _, r := range regions {
		mf, err := s.lookupRegion(r)
		if err != nil {
			return err
		}
		if err := mf.check(r, mf.size); err != nil {
			return err
		}
		if r.Len == 0 {
			continue
		}
		extents = append(extents, extent{mf.mem, alignDown(r.Offset, pageSize), alignUp(r.Offset+r.Len, pageSize)})
	}
	var first error
	for _, e := range extents {
		if err := unix.Madvise(e.mem[e.lo:e.hi], madv); err != nil && first == nil {
			first = fmt.Errorf("paging: madvise: %w", err)
		}
	}
	return first
}

// Close unmaps every file and closes it. Bytes returned earlier become invalid. A second
// Close returns ErrClosed.
func (s *MmapSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	var errs []error
	for id, mf := range s.files {
		if err := mf.unmap(); err != nil {
			errs = append(errs, fmt.Errorf("paging: mapping %d (%s): %w", id, mf.path, err))
		}
	}
	s.files = nil
	return errors.Join(errs...)
}
