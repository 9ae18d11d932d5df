package ort

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/partition"
)

// readInitializers reads the constant initializers of a fused node's graph for the partition:
// an in-memory one as a copy of ORT's bytes, an external-data one as its checked range of the
// file (the partition reads those bytes itself; ORT never does).
func readInitializers(g *C.OrtGraph) ([]partition.Initializer, error) {
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
	var inits []partition.Initializer
	for _, vi := range unsafe.Slice(arr, int(n)) {
		v, err := readValueInfo(vi)
		if err != nil {
			return nil, err
		}
		in, err := initializer(vi, v, modelPath)
		if err != nil {
			return nil, fmt.Errorf("initializer %q: %w", v.name, err)
		}
		inits = append(inits, in)
	}
	return inits, nil
}

// initializer reads a constant initializer checked against its type: an external-data one as
// its range of the file; an in-memory one as a copy of ORT's bytes.
func initializer(vi *C.OrtValueInfo, v value, modelPath string) (partition.Initializer, error) {
	in := partition.Initializer{Name: v.name, Info: v.info(0)}
	if !v.tensor {
		return in, fmt.Errorf("%w: not a tensor", errInvalid)
	}
	want, ok := byteSize(v)
	if !ok {
		return in, fmt.Errorf("%w: %s%v has no fixed byte size", ep.ErrUnsupported, v.dtype, v.shape)
	}
	var path *C.char
	var offset C.int64_t
	var size C.size_t
	var found C.int
	var ext *C.OrtExternalInitializerInfo
	if err := errorOf(C.cudaep_ort_value_info_external(vi, &path, &offset, &size, &found, &ext), "read external data info"); err != nil {
		return in, err
	}
	if found != 0 {
		loc, off := goString(path), int64(offset)
		C.cudaep_ort_release_external(ext)
		n, err := externalLength(uint64(size), want)
		if err != nil {
			return in, fmt.Errorf("%w: external data %q: %w (the tensor is %s%v)", errInvalid, loc, err, v.dtype, v.shape)
		}
		resolved, err := checkExternal(modelPath, loc, off, n)
		if err != nil {
			return in, fmt.Errorf("%w (the tensor %s%v needs %d bytes)", err, v.dtype, v.shape, want)
		}
		in.External = &partition.External{Path: resolved, Location: loc, Offset: uint64(off), Length: n}
		return in, nil
	}
	var data unsafe.Pointer
	var bytes C.size_t
	if err := errorOf(C.cudaep_ort_value_info_data(vi, &data, &bytes), "read an initializer"); err != nil {
		return in, err
	}
	if data == nil && want > 0 {
		return in, fmt.Errorf("%w: ORT gave no value for it", errInvalid)
	}
	if uint64(bytes) != want {
		return in, fmt.Errorf("%w: ORT's value holds %d bytes, the tensor %s%v needs %d", errInvalid, uint64(bytes), v.dtype, v.shape, want)
	}
	if want > 0 {
		in.Data = C.GoBytes(data, C.int(want))
	}
	return in, nil
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
