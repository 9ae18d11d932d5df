package ort

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/cudaep/cudaep/ep"
)

// loadWeights uploads the constant initializers of a partition's graph once: external-data
// ones read by cudaep straight from their file (ORT never reads those bytes), in-memory ones
// copied from ORT's value.
func (s *session) loadWeights(g *C.OrtGraph) (map[string]tensorBuf, error) {
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
	out := map[string]tensorBuf{}
	if n == 0 {
		return out, nil
	}
	release := func() {
		for _, w := range out {
			_ = w.buf.Release()
		}
	}
	for _, vi := range unsafe.Slice(arr, int(n)) {
		v, err := readValueInfo(vi)
		if err != nil {
			release()
			return nil, err
		}
		data, err := initializerBytes(vi, v, modelPath)
		if err != nil {
			release()
			return nil, fmt.Errorf("initializer %q: %w", v.name, err)
		}
		t, err := s.upload(v, data)
		if err != nil {
			release()
			return nil, fmt.Errorf("initializer %q: %w", v.name, err)
		}
		out[v.name] = t
	}
	return out, nil
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

// initializerBytes returns a constant initializer's bytes, checked against its type.
func initializerBytes(vi *C.OrtValueInfo, v value, modelPath string) ([]byte, error) {
	if !v.tensor {
		return nil, fmt.Errorf("%w: not a tensor", errInvalid)
	}
	want, ok := byteSize(v)
	if !ok {
		return nil, fmt.Errorf("%w: %s%v has no fixed byte size", ep.ErrUnsupported, v.dtype, v.shape)
	}
	var path *C.char
	var offset C.int64_t
	var size C.size_t
	var found C.int
	var ext *C.OrtExternalInitializerInfo
	if err := errorOf(C.cudaep_ort_value_info_external(vi, &path, &offset, &size, &found, &ext), "read external data info"); err != nil {
		return nil, err
	}
	if found != 0 {
		loc, off, n := goString(path), int64(offset), uint64(size)
		C.cudaep_ort_release_external(ext)
		if n != want {
			return nil, fmt.Errorf("%w: external data %q holds %d bytes, the tensor %s%v needs %d", errInvalid, loc, n, v.dtype, v.shape, want)
		}
		return readExternal(modelPath, loc, off, n)
	}
	var data unsafe.Pointer
	var bytes C.size_t
	if err := errorOf(C.cudaep_ort_value_info_data(vi, &data, &bytes), "read an initializer"); err != nil {
		return nil, err
	}
	if data == nil && want > 0 {
		return nil, fmt.Errorf("%w: ORT gave no value for it", errInvalid)
	}
	if uint64(bytes) != want {
		return nil, fmt.Errorf("%w: ORT's value holds %d bytes, the tensor %s%v needs %d", errInvalid, uint64(bytes), v.dtype, v.shape, want)
	}
	if want == 0 {
		return nil, nil
	}
	return C.GoBytes(data, C.int(want)), nil
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

// readExternal reads n bytes at off of the external-data file loc names, refusing what ORT's
// own loader refuses: a model loaded from bytes (no directory), an absolute location, one that
// escapes the model's directory (.., or a symlink out of it), and a range past the file's end.
func readExternal(modelPath, loc string, off int64, n uint64) ([]byte, error) {
	if modelPath == "" {
		return nil, fmt.Errorf("%w: external data %q of a model loaded from bytes: load the model from its file", errInvalid, loc)
	}
	if loc == "" || filepath.IsAbs(loc) || strings.HasPrefix(loc, "/") {
		return nil, fmt.Errorf("%w: %w: %q is absolute", errInvalid, errOutside, loc)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(modelPath))
	if err != nil {
		return nil, fmt.Errorf("%w: the model's directory: %w", errInvalid, err)
	}
	clean := filepath.Clean(filepath.Join(dir, loc))
	resolved, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return nil, fmt.Errorf("external data %q: %w", loc, err)
	}
	if rel, err := filepath.Rel(dir, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%w: %w: %q resolves to %s", errInvalid, errOutside, loc, resolved)
	}
	f, err := os.Open(resolved)
	if err != nil {
		return nil, fmt.Errorf("external data %q: %w", loc, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("external data %q: %w", loc, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: external data %q is not a regular file", errInvalid, loc)
	}
	if off < 0 || uint64(off) > uint64(st.Size()) || n > uint64(st.Size())-uint64(off) {
		return nil, fmt.Errorf("%w: external data %q: %d bytes at offset %d pass the end of the %d-byte file", errInvalid, loc, n, off, st.Size())
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("external data %q: %w", loc, err)
	}
	return buf, nil
}
