package main

/*
#include "capi_internal.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

// CudaEpOpenExternalData maps an external-data file (see cudaep.h).
//
//export CudaEpOpenExternalData
func CudaEpOpenExternalData(provider C.CudaEpProvider, path *C.cudaep_cchar, outMapping *C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outMapping == nil {
		return statusOf(argError("out_mapping is NULL"))
	}
	name, err := goString(path, "path")
	if err != nil {
		return statusOf(err)
	}
	var id ep.MappingID
	if err := withProvider(handles.Handle(provider), func(p *ep.Provider) (err error) {
		id, err = p.OpenExternalData(name)
		return err
	}); err != nil {
		return statusOf(err)
	}
	*outMapping = C.uint64_t(id)
	return nil
}

// decodeWeightSpec reads a CudaEpWeightSpec, copying its arrays.
func decodeWeightSpec(cs *C.CudaEpWeightSpec) (ep.WeightSpec, error) {
	if cs.reserved != 0 {
		return ep.WeightSpec{}, argError("spec->reserved is %d; it must be 0", uint32(cs.reserved))
	}
	shape, err := cArray((*int64)(unsafe.Pointer(cs.shape)), uint64(cs.rank), maxRank, "spec->shape")
	if err != nil {
		return ep.WeightSpec{}, err
	}
	if cs.num_regions == 0 {
		return ep.WeightSpec{}, argError("spec->num_regions is 0: a weight has at least one region")
	}
	regions, err := cArray((*C.CudaEpRegion)(unsafe.Pointer(cs.regions)), uint64(cs.num_regions), maxArray, "spec->regions")
	if err != nil {
		return ep.WeightSpec{}, err
	}
	spec := ep.WeightSpec{
		Boundary: ep.Boundary(cs.boundary), DType: ep.WeightDType(cs.dtype),
		Shape: append([]int64{}, shape...), ByteCount: uint64(cs.byte_count),
		Regions: make([]ep.Region, len(regions)),
	}
	for i, r := range regions {
		spec.Regions[i] = ep.Region{Mapping: ep.MappingID(r.mapping), Offset: uint64(r.offset), Len: uint64(r.length)}
	}
	return spec, nil
}

// CudaEpCreateLazyWeight validates a weight spec and makes the weight (see cudaep.h).
//
//export CudaEpCreateLazyWeight
func CudaEpCreateLazyWeight(provider C.CudaEpProvider, spec *C.cudaep_cweight_spec, outWeight *C.CudaEpLazyWeight) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if spec == nil {
		return statusOf(argError("spec is NULL"))
	}
	if outWeight == nil {
		return statusOf(argError("out_weight is NULL"))
	}
	ws, err := decodeWeightSpec((*C.CudaEpWeightSpec)(unsafe.Pointer(spec)))
	if err != nil {
		return statusOf(err)
	}
	c, err := adopt(handles.Handle(provider))
	if err != nil {
		return statusOf(err)
	}
	w, err := c.p.NewLazyWeight(ws)
	if err != nil {
		_ = c.parent.Release()
		return statusOf(err)
	}
	h, err := insertChild(lazyWeightTable, &lazyWeightObject{child: c, w: w}, (*lazyWeightObject).finalize)
	if err != nil {
		return statusOf(err)
	}
	*outWeight = C.CudaEpLazyWeight(h)
	return nil
}

// CudaEpReleaseLazyWeight releases a lazy weight handle (see cudaep.h).
//
//export CudaEpReleaseLazyWeight
func CudaEpReleaseLazyWeight(weight C.CudaEpLazyWeight) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(lazyWeightTable.Remove(handles.Handle(weight)))
}

// CudaEpLazyWeightGetSize returns a lazy weight's image size (see cudaep.h).
//
//export CudaEpLazyWeightGetSize
func CudaEpLazyWeightGetSize(weight C.CudaEpLazyWeight, outBytes *C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outBytes == nil {
		return statusOf(argError("out_bytes is NULL"))
	}
	var n uint64
	if err := with(lazyWeightTable, handles.Handle(weight), func(w *lazyWeightObject) error {
		n = w.w.Bytes()
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outBytes = C.uint64_t(n)
	return nil
}

// CudaEpPrefetchWeight routes a layer through the residency (see cudaep.h).
//
//export CudaEpPrefetchWeight
func CudaEpPrefetchWeight(provider C.CudaEpProvider, layer C.uint64_t, weight C.CudaEpLazyWeight, decline *C.CudaEpDecline) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	out := structOut{unsafe.Pointer(decline), "decline", C.sizeof_CudaEpDecline}
	if err := out.check(); err != nil {
		return statusOf(err)
	}
	v := C.CudaEpDecline{layer: C.uint64_t(layer)}
	err := withProvider(handles.Handle(provider), func(p *ep.Provider) error {
		return with(lazyWeightTable, handles.Handle(weight), func(w *lazyWeightObject) error {
			if err := w.sameProvider(p, "weight"); err != nil {
				return err
			}
			v.boundary = C.int32_t(w.w.Boundary())
			d, err := p.PrefetchWeight(ep.LayerID(layer), w.w)
			if err != nil {
				return err
			}
			v.reason = C.int32_t(d.Reason)
			v.layer_bytes, v.capacity = C.uint64_t(d.LayerBytes), C.uint64_t(d.Capacity)
			return nil
		})
	})
	if err != nil {
		return statusOf(err)
	}
	out.write(unsafe.Pointer(&v), unsafe.Sizeof(v))
	return nil
}

// CudaEpPageWeight consumes a prefetched layer (see cudaep.h).
//
//export CudaEpPageWeight
func CudaEpPageWeight(provider C.CudaEpProvider, layer C.uint64_t, outWeight *C.CudaEpPagedWeight) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outWeight == nil {
		return statusOf(argError("out_weight is NULL"))
	}
	c, err := adopt(handles.Handle(provider))
	if err != nil {
		return statusOf(err)
	}
	pw, err := c.p.PageWeight(ep.LayerID(layer))
	if err != nil {
		_ = c.parent.Release()
		return statusOf(err)
	}
	h, err := insertChild(pagedWeightTable, &pagedWeightObject{child: c, pw: pw}, (*pagedWeightObject).finalize)
	if err != nil {
		return statusOf(err)
	}
	*outWeight = C.CudaEpPagedWeight(h)
	return nil
}

// CudaEpPagedWeightGetPointer returns a paged image's device address (see cudaep.h).
//
//export CudaEpPagedWeightGetPointer
func CudaEpPagedWeightGetPointer(weight C.CudaEpPagedWeight, outDevicePtr *C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outDevicePtr == nil {
		return statusOf(argError("out_device_ptr is NULL"))
	}
	var ptr uint64
	if err := with(pagedWeightTable, handles.Handle(weight), func(w *pagedWeightObject) error {
		ptr = uint64(w.pw.Ptr())
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outDevicePtr = C.uint64_t(ptr)
	return nil
}

// CudaEpPagedWeightGetSize returns a paged image's size (see cudaep.h).
//
//export CudaEpPagedWeightGetSize
func CudaEpPagedWeightGetSize(weight C.CudaEpPagedWeight, outBytes *C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	if outBytes == nil {
		return statusOf(argError("out_bytes is NULL"))
	}
	var n uint64
	if err := with(pagedWeightTable, handles.Handle(weight), func(w *pagedWeightObject) error {
		n = w.pw.Len()
		return nil
	}); err != nil {
		return statusOf(err)
	}
	*outBytes = C.uint64_t(n)
	return nil
}

// CudaEpReleasePagedWeight releases a paged weight and its slot (see cudaep.h).
//
//export CudaEpReleasePagedWeight
func CudaEpReleasePagedWeight(weight C.CudaEpPagedWeight) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(pagedWeightTable.Remove(handles.Handle(weight)))
}

// CudaEpCancelWeight abandons a prefetched layer (see cudaep.h).
//
//export CudaEpCancelWeight
func CudaEpCancelWeight(provider C.CudaEpProvider, layer C.uint64_t) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	return statusOf(withProvider(handles.Handle(provider), func(p *ep.Provider) error {
		if err := p.CancelWeight(ep.LayerID(layer)); err != nil {
			return fmt.Errorf("cancel layer %d: %w", uint64(layer), err)
		}
		return nil
	}))
}

// CudaEpGetResidencyStats fills a CudaEpResidencyStats (see cudaep.h).
//
//export CudaEpGetResidencyStats
func CudaEpGetResidencyStats(provider C.CudaEpProvider, stats *C.CudaEpResidencyStats) (st *C.CudaEpStatus) {
	defer recoverInto(&st)
	out := structOut{unsafe.Pointer(stats), "stats", C.sizeof_CudaEpResidencyStats}
	if err := out.check(); err != nil {
		return statusOf(err)
	}
	var (
		rs     ep.ResidencyStats
		active bool
	)
	if err := withProvider(handles.Handle(provider), func(p *ep.Provider) error {
		rs, active = p.ResidencyStats()
		return nil
	}); err != nil {
		return statusOf(err)
	}
	v := C.CudaEpResidencyStats{
		active: C.uint32_t(cBool(active)), routed: C.uint64_t(rs.Routed), consumed: C.uint64_t(rs.Consumed),
		released: C.uint64_t(rs.Released), cancelled: C.uint64_t(rs.Cancelled),
		declined_oversize: C.uint64_t(rs.DeclinedOversize), declined_busy: C.uint64_t(rs.DeclinedBusy),
		fill_errors: C.uint64_t(rs.FillErrors), quarantined: C.uint64_t(rs.Quarantined),
		zero_copy_layers: C.uint64_t(rs.ZeroCopyLayers), staging_layers: C.uint64_t(rs.StagingLayers),
		fallback_layers: C.uint64_t(rs.FallbackLayers),
	}
	out.write(unsafe.Pointer(&v), unsafe.Sizeof(v))
	return nil
}
