package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// The lifecycle additions of ABI 3: removing a keyed graph slot, closing one external-data
// file, recovering quarantined paging slots and reading why paging fell back to staging.

// CudaEpRemoveGraph resets a keyed slot and forgets its key (see cudaep.h).
//
//export CudaEpRemoveGraph
func CudaEpRemoveGraph(provider C.CudaEpProvider, slotKind C.int32_t, slotKey C.int64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(withSlot(provider, slotKind, slotKey, (*ep.Provider).RemoveGraph))
}

// CudaEpCloseExternalData gives up one reference to an opened external-data file (see cudaep.h).
//
//export CudaEpCloseExternalData
func CudaEpCloseExternalData(provider C.CudaEpProvider, mapping C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(withProvider(handles.Handle(provider), func(p *ep.Provider) error {
		return p.CloseExternalData(ep.MappingID(mapping))
	}))
}

// CudaEpRecoverWeights puts the residency's quarantined slots back in service (see cudaep.h).
//
//export CudaEpRecoverWeights
func CudaEpRecoverWeights(provider C.CudaEpProvider, outRecovered *C.uint32_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	var n int
	if err := withProvider(handles.Handle(provider), func(p *ep.Provider) (err error) {
		n, err = p.RecoverWeights()
		return err
	}); err != nil {
		return statusOf(err)
	}
	if outRecovered != nil {
		*outRecovered = C.uint32_t(n)
	}
	return nil
}

// CudaEpDoubleBufferRecover puts a double buffer's quarantined slots back in service (see
// cudaep.h).
//
//export CudaEpDoubleBufferRecover
func CudaEpDoubleBufferRecover(doubleBuffer C.CudaEpDoubleBuffer, outRecovered *C.uint32_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	var n int
	if err := with(doubleBufferTable, handles.Handle(doubleBuffer), func(d *doubleBufferObject) (err error) {
		n, err = d.db.Recover()
		return err
	}); err != nil {
		return statusOf(err)
	}
	if outRecovered != nil {
		*outRecovered = C.uint32_t(n)
	}
	return nil
}

// CudaEpGetWeightFallback returns why the residency last fell back to staging (see cudaep.h).
//
//export CudaEpGetWeightFallback
func CudaEpGetWeightFallback(provider C.CudaEpProvider, buf *C.char, bufSize C.size_t, outNeeded *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return providerString(provider, func(p *ep.Provider) string {
		st, _ := p.ResidencyStats()
		return fallbackText(st.LastFallback)
	}, stringOut{buf, bufSize, outNeeded})
}

// CudaEpDoubleBufferGetFallback returns why a double buffer last fell back to staging (see
// cudaep.h).
//
//export CudaEpDoubleBufferGetFallback
func CudaEpDoubleBufferGetFallback(doubleBuffer C.CudaEpDoubleBuffer, buf *C.char, bufSize C.size_t, outNeeded *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	out := stringOut{buf, bufSize, outNeeded}
	var s string
	if err := with(doubleBufferTable, handles.Handle(doubleBuffer), func(d *doubleBufferObject) error {
		s = fallbackText(d.db.Metrics().LastFallback)
		return out.check(s)
	}); err != nil {
		return statusOf(err)
	}
	out.write(s)
	return nil
}

// fallbackText is a fallback's description, or "" for none.
func fallbackText(f *ep.Fallback) string {
	if f == nil {
		return ""
	}
	return f.String()
}
