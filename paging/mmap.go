package paging

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

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
	id   MappingID
	path string      // as first opened
	info os.FileInfo // the file's identity (os.SameFile), to share one mapping per file
	file *os.File    // kept open to re-check the size (fstat) before each layer
	mem  []byte      // the mapping: file size rounded up to the page size; nil for an empty file
	size uint64      // file size at mapping time
	refs int         // Opens not yet matched by a Close
	pins map[*filePin]struct{}
	// holders are the registries that may keep pages of the mapping registered with the
	// driver; they unregister them before the mapping is unmapped.
	holders map[*registry]struct{}
}

// MmapSource maps ONNX external-data files and resolves regions of them. Each file is mapped
// whole with MAP_SHARED and PROT_READ: shared, because the driver may register (page-lock) the
// mapping for zero-copy transfers, and registering a private mapping can hang the machine;
// read-only, because weights are never written.
//
// # Files and ids
//
// Open maps a file and names it with a MappingID the source chooses. A file is mapped once:
// opening it again, by the same path or another one that reaches it (a symbolic link, a hard
// link, "a/../b"), returns the same id and takes one more reference. Close(id) drops one
// reference and unmaps the file at the last one; ids are never reused, so a region naming a
// closed id fails with a *RegionError that says so, and reopening the file gives a new id.
//
// A file is in use while a DoubleBuffer fill reads from it: from the Prefetch that resolves
// its regions until the pipeline knows the copy completed, and while StagingPool.RegisterFile
// registers it. Close refuses to unmap a file in use (ErrFileBusy). Only pipelines reading
// this source directly are seen; a wrapper around the source hides them.
//
// Pages of a file may stay registered with the driver after the copies that read them
// (StagingPool keeps registrations for the next prefill): Close and CloseAll unregister them
// before unmapping the file.
//
// An MmapSource is safe for concurrent use. CloseAll unmaps every file at teardown: call it
// only after every pipeline that reads from the source has been closed.
type MmapSource struct {
	mu     sync.RWMutex
	files  map[MappingID]*mappedFile
	gone   map[MappingID]string // closed ids and their paths, for clear errors
	last   MappingID            // the latest id handed out
	closed bool
}

var (
	_ MappingSource      = (*MmapSource)(nil)
	_ Preparer           = (*MmapSource)(nil)
	_ registrationHolder = (*MmapSource)(nil)
)

// NewMmapSource returns an empty source; add files with Open.
func NewMmapSource() *MmapSource {
	return &MmapSource{files: map[MappingID]*mappedFile{}, gone: map[MappingID]string{}}
}

// Open maps the file at path, read-only and shared, and returns its id with one reference
// taken. When the file is already open (by this path or any other that reaches the same
// file), no second mapping is made: the existing id is returned, with the mapping as it was
// made, and one more reference taken. Every successful Open is matched by one Close.
//
// # Errors
//
// A missing or unreadable file, or one that is not a regular file, is an error naming the
// path that wraps the *os.PathError (errors.Is(err, fs.ErrNotExist) holds for a missing one).
// ErrClosed after CloseAll.
func (s *MmapSource) Open(path string) (MappingID, error) {
	// The file's identity is its device and inode (os.SameFile), not its name: that catches
	// every spelling of one file, links included, and tells a file replaced under the same
	// name from the one mapped before.
	path = filepath.Clean(path)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("paging: external data: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return 0, fmt.Errorf("paging: external data: %w", err)
	}
	if id, err := s.share(st); id != 0 || err != nil {
		_ = f.Close()
		return id, err
	}
	mf, err := mapFile(f, path, st)
	if err != nil {
		_ = f.Close()
		return 0, fmt.Errorf("paging: external data: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errors.Join(ErrClosed, mf.unmap())
	}
	if other := s.sameLocked(st); other != nil {
		// A concurrent Open of the same file mapped it first: share that mapping.
		other.refs++
		return other.id, mf.unmap()
	}
	s.last++
	mf.id, mf.refs = s.last, 1
	s.files[mf.id] = mf
	return mf.id, nil
}

// share takes a reference to the open mapping of the file st describes and returns its id, or
// 0 when the file is not open.
func (s *MmapSource) share(st os.FileInfo) (MappingID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	if mf := s.sameLocked(st); mf != nil {
		mf.refs++
		return mf.id, nil
	}
	return 0, nil
}

func (s *MmapSource) sameLocked(st os.FileInfo) *mappedFile {
	for _, mf := range s.files {
		if os.SameFile(mf.info, st) {
			return mf
		}
	}
	return nil
}

// Close drops one reference to the file opened as id and, at the last one, unmaps and closes
// it. Bytes returned for its regions become invalid then, and every later use of id fails
// with a *RegionError naming the closed mapping.
//
// Before refusing a busy file, Close asks the pipelines reading it whether their copies have
// completed since they last looked (a non-blocking query of the device), so a file whose
// layers were all waited for, released and copied is closed without closing any pipeline.
//
// # Errors
//
//   - ErrFileBusy, wrapped with the mapping, the path and the layers still being copied from
//     it, when the last reference would be dropped while a fill may still read the file or
//     holds its pages registered with the driver. Nothing changes: the reference is kept.
//   - A *RegionError for an id that is not open (never opened, or already closed).
//   - ErrClosed after CloseAll.
func (s *MmapSource) Close(id MappingID) error {
	for polled := false; ; polled = true {
		s.mu.Lock()
		mf, err := s.lookupLocked(id)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		if mf.refs > 1 {
			mf.refs--
			s.mu.Unlock()
			return nil
		}
		if len(mf.pins) == 0 {
			delete(s.files, id)
			s.gone[id] = mf.path
			s.mu.Unlock()
			// No fill can pin the file any more: its registrations are idle.
			if err := errors.Join(mf.dropRegistrations(), mf.unmap()); err != nil {
				return fmt.Errorf("paging: mapping %d (%s): %w", id, mf.path, err)
			}
			return nil
		}
		if polled {
			err := mf.busyError()
			s.mu.Unlock()
			return err
		}
		polls := make([]func(), 0, len(mf.pins))
		for p := range mf.pins {
			if p.poll != nil {
				polls = append(polls, p.poll)
			}
		}
		s.mu.Unlock()
		// Without the source's lock: a pipeline's poll takes its own lock, then this one.
		for _, poll := range polls {
			poll()
		}
	}
}

func (mf *mappedFile) busyError() error {
	var layers []LayerID
	registering := false
	for p := range mf.pins {
		if p.poll == nil {
			registering = true
			continue
		}
		layers = append(layers, p.layer)
	}
	if len(layers) == 0 && registering {
		return fmt.Errorf("%w: mapping %d (%s): it is being registered with the driver (StagingPool.RegisterFile); close it after that returns",
			ErrFileBusy, mf.id, mf.path)
	}
	slices.Sort(layers)
	return fmt.Errorf("%w: mapping %d (%s): the copies of layers %v may still read it; close it after they complete (wait for and release them, or close their pipeline)",
		ErrFileBusy, mf.id, mf.path, slices.Compact(layers))
}

// dropRegistrations has every registry holding pages of the mapping unregister them; the file
// is no longer reachable through its source, so nothing registers it again.
func (mf *mappedFile) dropRegistrations() error {
	if len(mf.mem) == 0 {
		return nil
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(mf.mem)))
	hi := lo + uintptr(len(mf.mem))
	var errs []error
	for r := range mf.holders {
		errs = append(errs, r.dropRange(lo, hi))
	}
	mf.holders = nil
	return errors.Join(errs...)
}

// holdRegistrations records that r may keep pages of mapping id registered (see
// registrationHolder). The caller has the file pinned.
func (s *MmapSource) holdRegistrations(id MappingID, r *registry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	mf, err := s.lookupLocked(id)
	if err != nil {
		return err
	}
	if mf.holders == nil {
		mf.holders = map[*registry]struct{}{}
	}
	mf.holders[r] = struct{}{}
	return nil
}

// pinWhole marks the file opened as id in use (as a fill's pin does, with no pipeline to ask)
// and returns its whole mapping, for StagingPool.RegisterFile.
func (s *MmapSource) pinWhole(id MappingID) (*filePin, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mf, err := s.lookupLocked(id)
	if err != nil {
		return nil, nil, err
	}
	p := &filePin{src: s, files: []*mappedFile{mf}}
	if mf.pins == nil {
		mf.pins = map[*filePin]struct{}{}
	}
	mf.pins[p] = struct{}{}
	return p, mf.mem, nil
}

// filePin marks the files of one fill in use until the pipeline knows the fill completed.
type filePin struct {
	src   *MmapSource
	files []*mappedFile
	layer LayerID
	poll  func() // asks the pipeline to look again whether its fills completed; nil for RegisterFile
}

// pin marks the files of regions in use by layer's fill; poll lets Close ask the pipeline
// whether the fill has completed. It fails, pinning nothing, when a region names a mapping
// that is not open.
func (s *MmapSource) pin(regions []Region, layer LayerID, poll func()) (*filePin, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &filePin{src: s, layer: layer, poll: poll}
	for _, r := range regions {
		mf, err := s.lookupLocked(r.Mapping)
		if err != nil {
			if re, ok := err.(*RegionError); ok {
				re.Offset, re.Len = r.Offset, r.Len
			}
			return nil, err
		}
		if !slices.Contains(p.files, mf) {
			p.files = append(p.files, mf)
		}
	}
	for _, mf := range p.files {
		if mf.pins == nil {
			mf.pins = map[*filePin]struct{}{}
		}
		mf.pins[p] = struct{}{}
	}
	return p, nil
}

// release ends the pin; it is safe on a nil pin and after CloseAll.
func (p *filePin) release() {
	if p == nil {
		return
	}
	p.src.mu.Lock()
	defer p.src.mu.Unlock()
	for _, mf := range p.files {
		delete(mf.pins, p)
	}
	p.files = nil
}

func mapFile(f *os.File, path string, st os.FileInfo) (*mappedFile, error) {
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	mf := &mappedFile{path: path, info: st, file: f, size: uint64(st.Size())}
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
	return s.lookupLocked(id)
}

// lookupLocked finds id's file; s.mu is held (either way).
func (s *MmapSource) lookupLocked(id MappingID) (*mappedFile, error) {
	if s.closed {
		return nil, ErrClosed
	}
	mf := s.files[id]
	if mf == nil {
		if path, ok := s.gone[id]; ok {
			return nil, &RegionError{Mapping: id, Path: path, Reason: "the mapping was closed (MmapSource.Close); reopen the file for a new id"}
		}
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

// CloseAll unregisters what the driver still holds of every file, then unmaps and closes them
// all, whatever their references, for teardown: bytes returned earlier become invalid. Close
// every pipeline reading the source first. A second CloseAll returns ErrClosed.
func (s *MmapSource) CloseAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	var errs []error
	for id, mf := range s.files {
		if err := errors.Join(mf.dropRegistrations(), mf.unmap()); err != nil {
			errs = append(errs, fmt.Errorf("paging: mapping %d (%s): %w", id, mf.path, err))
		}
	}
	s.files = nil
	return errors.Join(errs...)
}
