package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// CudaEpCreateOptions creates an options object holding the defaults (see cudaep.h).
//
//export CudaEpCreateOptions
func CudaEpCreateOptions(outOptions *C.CudaEpOptions) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outOptions == nil {
		return statusOf(argError("out_options is NULL"))
	}
	h, err := optionsTable.Insert(&optionsObject{opts: ep.DefaultOptions()})
	if err != nil {
		return statusOf(err)
	}
	*outOptions = C.CudaEpOptions(h)
	return nil
}

// CudaEpSetOption validates and stores one option (see cudaep.h).
//
//export CudaEpSetOption
func CudaEpSetOption(options C.CudaEpOptions, key, value *C.cudaep_cchar) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	obj, err := optionsTable.Get(handles.Handle(options))
	if err != nil {
		return statusOf(err)
	}
	k, err := goString(key, "key")
	if err != nil {
		return statusOf(err)
	}
	v, err := goString(value, "value")
	if err != nil {
		return statusOf(err)
	}
	obj.mu.Lock()
	defer obj.mu.Unlock()
	return statusOf(obj.opts.Set(k, v))
}

// CudaEpGetOption reads one option back in canonical form (see cudaep.h).
//
//export CudaEpGetOption
func CudaEpGetOption(options C.CudaEpOptions, key *C.cudaep_cchar, buf *C.char, bufSize C.size_t, outNeeded *C.size_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	obj, err := optionsTable.Get(handles.Handle(options))
	if err != nil {
		return statusOf(err)
	}
	k, err := goString(key, "key")
	if err != nil {
		return statusOf(err)
	}
	v, err := obj.snapshot().Get(k)
	if err != nil {
		return statusOf(err)
	}
	out := stringOut{buf, bufSize, outNeeded}
	if err := out.check(v); err != nil {
		return statusOf(err)
	}
	out.write(v)
	return nil
}

// CudaEpReleaseOptions releases an options object (see cudaep.h).
//
//export CudaEpReleaseOptions
func CudaEpReleaseOptions(options C.CudaEpOptions) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(optionsTable.Remove(handles.Handle(options)))
}
