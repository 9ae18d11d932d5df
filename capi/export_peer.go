package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// The peer paths, taken from the header so that they cannot drift from ep's numbering (a
// mismatch fails the build: the array sizes below go negative).
var (
	_ [C.CUDAEP_PEER_PATH_NONE - int(ep.PeerPathNone)]struct{}
	_ [int(ep.PeerPathNone) - C.CUDAEP_PEER_PATH_NONE]struct{}
	_ [C.CUDAEP_PEER_PATH_DEVICE - int(ep.PeerPathDevice)]struct{}
	_ [int(ep.PeerPathDevice) - C.CUDAEP_PEER_PATH_DEVICE]struct{}
	_ [C.CUDAEP_PEER_PATH_DIRECT - int(ep.PeerPathDirect)]struct{}
	_ [int(ep.PeerPathDirect) - C.CUDAEP_PEER_PATH_DIRECT]struct{}
	_ [C.CUDAEP_PEER_PATH_STAGED - int(ep.PeerPathStaged)]struct{}
	_ [int(ep.PeerPathStaged) - C.CUDAEP_PEER_PATH_STAGED]struct{}
)

// CudaEpCopyPeer queues a copy between buffers of providers on any devices (see cudaep.h).
//
//export CudaEpCopyPeer
func CudaEpCopyPeer(dst C.CudaEpBuffer, dstOffset C.uint64_t, src C.CudaEpBuffer, srcOffset, size C.uint64_t, outPath *C.int32_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	dOff, sOff, n := uint64(dstOffset), uint64(srcOffset), uint64(size)
	var path ep.PeerPath
	err := with(bufferTable, handles.Handle(dst), func(d *bufferObject) error {
		return with(bufferTable, handles.Handle(src), func(s *bufferObject) error {
			if err := checkRange(dOff, n, d.buf.Size(), "dst buffer"); err != nil {
				return err
			}
			if err := checkRange(sOff, n, s.buf.Size(), "src buffer"); err != nil {
				return err
			}
			var err error
			path, err = d.p.CopyPeer(d.buf, dOff, s.buf, sOff, n)
			return err
		})
	})
	if err != nil {
		return statusOf(err)
	}
	if outPath != nil {
		*outPath = C.int32_t(path)
	}
	return nil
}
