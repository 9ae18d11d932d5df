package main

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
	"github.com/cudaep/cudaep/paging"
)

func TestCodeOfMapsEveryErrorFamily(t *testing.T) {
	scratch := handles.NewTable(handles.Config[int]{Kind: 200, Name: "scratch"})
	h, err := scratch.Insert(1)
	require.NoError(t, err)
	require.NoError(t, scratch.Remove(h))
	_, stale := scratch.Get(h)
	_, invalid := scratch.Get(0)
	require.Error(t, stale)
	require.Error(t, invalid)

	tests := []struct {
		name string
		err  error
		want code
	}{
		{"nil", nil, codeOK},
		{"stale handle", stale, codeStaleHandle},
		{"invalid handle", invalid, codeInvalidHandle},
		{"table full", fmt.Errorf("insert: %w", handles.ErrFull), codeOutOfMemory},
		{"shim argument", argError("out_options is NULL"), codeInvalidArgument},
		{"option error", fmt.Errorf("ep: %w", &ep.OptionError{Key: "tf32", Value: "x"}), codeInvalidArgument},
		{"no such device", fmt.Errorf("%w: device_id 3 of 1", ep.ErrNoDevice), codeNotFound},
		{"no driver", fmt.Errorf("ep: backend=cuda: %w", &cudadrv.LibraryError{Library: "the CUDA driver"}), codeNotFound},
		{"driver reports no device", &cudadrv.Error{Op: "cuInit", Result: cudadrv.ErrorNoDevice}, codeNotFound},
		{"device out of memory", fmt.Errorf("alloc: %w", &cudadrv.Error{Op: "cuMemAlloc_v2", Result: cudadrv.ErrorOutOfMemory}), codeOutOfMemory},
		{"other driver error", &cudadrv.Error{Op: "cuLaunchKernel", Result: cudadrv.ErrorLaunchFailed}, codeCUDAError},
		{"cublas", &cudadrv.BLASError{Op: "cublasSgemm_v2", Status: cudadrv.BLASExecutionFailed}, codeCUDAError},
		{"nvrtc", &cudadrv.CompileError{Program: "k.cu", Name: "NVRTC_ERROR_COMPILATION"}, codeCUDAError},
		{"unsupported", fmt.Errorf("sim: nvrtc: %w", cudadrv.ErrUnsupported), codeUnsupported},
		{"closed provider", fmt.Errorf("ep: %w", ep.ErrClosed), codeWrongState},
		{"released buffer", fmt.Errorf("retain: %w", ep.ErrReleased), codeStaleHandle},
		{"too many keyed slots", fmt.Errorf("x: %w", graphs.ErrTooManySlots), codeOutOfMemory},
		{"stale ticket", &paging.StaleGenerationError{Layer: 1, Slot: 0, TicketGen: 1, CurrentGen: 2}, codeStaleGeneration},
		{"pool capacity decline", &paging.PoolCapacityError{LayerBytes: 1 << 30, RetentionCap: 1 << 20}, codeDeclined},
		{"residency decline", &paging.Decline{Reason: paging.DeclineOversize}, codeDeclined},
		{"replay with nothing captured", fmt.Errorf("ep: %w", graphs.ErrNotInstalled), codeWrongState},
		{"end without begin", fmt.Errorf("ep: %w", graphs.ErrNotCapturing), codeWrongState},
		{"reset during capture", fmt.Errorf("ep: %w", graphs.ErrCaptureActive), codeWrongState},
		{"end on the wrong thread", fmt.Errorf("ep: %w", graphs.ErrWrongThread), codeWrongState},
		{"drain inside capture", fmt.Errorf("ep: %w", graphs.ErrDrainInCapture), codeWrongState},
		{"invalidated capture wrapping the driver's error", fmt.Errorf("%w: %w", graphs.ErrCaptureInvalidated,
			&cudadrv.Error{Op: "cuStreamEndCapture", Result: cudadrv.ErrorStreamCaptureInvalidated}), codeWrongState},
		{"host copy during capture", fmt.Errorf("ep: %w", ep.ErrCaptureLive), codeWrongState},
		{"audit rejection", fmt.Errorf("ep: %w", graphs.ErrRejected), codeUnsupported},
		{"unsupported kernel", fmt.Errorf("ep: %w", kernels.ErrUnsupported), codeUnsupported},
		{"tensor mismatch", fmt.Errorf("ep: %w", kernels.ErrTensorMismatch), codeInvalidArgument},
		{"bad launch", fmt.Errorf("ep: %w", ep.ErrInvalidLaunch), codeInvalidArgument},
		{"segment index", fmt.Errorf("ep: %w", graphs.ErrSegmentIndex), codeInvalidArgument},
		{"bad weight", fmt.Errorf("ep: %w", paging.ErrInvalidWeight), codeInvalidArgument},
		{"region past the file", &paging.RegionError{Reason: "past end of file"}, codeInvalidArgument},
		{"layer too large", &paging.LayerSizeError{LayerBytes: 2, Capacity: 1}, codeInvalidArgument},
		{"missing file", fmt.Errorf("open: %w", fs.ErrNotExist), codeNotFound},
		{"both slots busy", fmt.Errorf("x: %w", paging.ErrNoFreeSlot), codeWrongState},
		{"page not prefetched", fmt.Errorf("x: %w", paging.ErrNotPrefetched), codeWrongState},
		{"slot state", &paging.SlotStateError{Op: "release"}, codeWrongState},
		{"failed fill", &paging.FillError{Err: &cudadrv.Error{Op: "cuMemcpyHtoDAsync_v2", Result: cudadrv.ErrorLaunchFailed}}, codeCUDAError},
		{"quarantined slot", fmt.Errorf("x: %w", paging.ErrQuarantined), codeWrongState},
		{"unloaded module", fmt.Errorf("x: %w", cudadrv.ErrDestroyed), codeWrongState},
		{"anything else", errors.New("surprise"), codeFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, codeOf(tt.err))
		})
	}
}

func TestStatusOfCarriesCodeAndMessage(t *testing.T) {
	assert.Nil(t, statusOf(nil))
	c, msg := readStatus(statusOf(fmt.Errorf("%w: device_id 9 is out of range", ep.ErrNoDevice)))
	assert.Equal(t, codeNotFound, c)
	assert.Equal(t, "ep: no such device: device_id 9 is out of range", msg)

	c, msg = readStatus(newStatus(codeWrongState, ""))
	assert.Equal(t, codeWrongState, c)
	assert.Equal(t, "", msg)
}

// panicking is shaped like an export: a named status result and recoverInto deferred first.
func panicking(v any) (st *status) {
	defer recoverInto(&st)
	panic(v)
}

func TestRecoverIntoTurnsPanicsIntoFail(t *testing.T) {
	c, msg := readStatus(panicking("index out of range in a shim"))
	assert.Equal(t, codeFail, c)
	assert.Contains(t, msg, "recovered panic")
	assert.Contains(t, msg, "index out of range in a shim")

	c, msg = readStatus(panicking(fmt.Errorf("wrapped %w", ep.ErrClosed)))
	assert.Equal(t, codeFail, c)
	assert.Contains(t, msg, "wrapped ep: provider closed")
}
