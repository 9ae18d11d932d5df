package ep_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/ep/kernels"
	"github.com/cudaep/cudaep/graphs"
	"github.com/cudaep/cudaep/paging"
)

// TestCodeClassifiesEveryErrorFamily: ep.Code is the one classification of errors leaving ep;
// front ends map its codes with a table, and every code has a case here.
func TestCodeClassifiesEveryErrorFamily(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want ep.ErrorCode
	}{
		{"nil", nil, ep.CodeOK},
		{"argument", fmt.Errorf("%w: size is 0", ep.ErrInvalidArgument), ep.CodeInvalidArgument},
		{"option error", fmt.Errorf("ep: %w", &ep.OptionError{Key: "tf32", Value: "x"}), ep.CodeInvalidArgument},
		{"no such device", fmt.Errorf("%w: device_id 3 of 1", ep.ErrNoDevice), ep.CodeNotFound},
		{"no driver", fmt.Errorf("ep: backend=cuda: %w", &cudadrv.LibraryError{Library: "the CUDA driver"}), ep.CodeNotFound},
		{"driver reports no device", &cudadrv.Error{Op: "cuInit", Result: cudadrv.ErrorNoDevice}, ep.CodeNotFound},
		{"device out of memory", fmt.Errorf("alloc: %w", &cudadrv.Error{Op: "cuMemAlloc_v2", Result: cudadrv.ErrorOutOfMemory}), ep.CodeOutOfMemory},
		{"other driver error", &cudadrv.Error{Op: "cuLaunchKernel", Result: cudadrv.ErrorLaunchFailed}, ep.CodeDriver},
		{"cublas", &cudadrv.BLASError{Op: "cublasSgemm_v2", Status: cudadrv.BLASExecutionFailed}, ep.CodeDriver},
		{"nvrtc", &cudadrv.CompileError{Program: "k.cu", Name: "NVRTC_ERROR_COMPILATION"}, ep.CodeDriver},
		{"unsupported", fmt.Errorf("sim: nvrtc: %w", cudadrv.ErrUnsupported), ep.CodeUnsupported},
		{"closed provider", fmt.Errorf("ep: %w", ep.ErrClosed), ep.CodeWrongState},
		{"released buffer", fmt.Errorf("retain: %w", ep.ErrReleased), ep.CodeReleased},
		{"released paged weight", paging.ErrReleased, ep.CodeReleased},
		{"too many keyed slots", fmt.Errorf("x: %w", graphs.ErrTooManySlots), ep.CodeOutOfMemory},
		{"stale ticket", &paging.StaleGenerationError{Layer: 1, Slot: 0, TicketGen: 1, CurrentGen: 2}, ep.CodeStaleGeneration},
		{"pool capacity decline", &paging.PoolCapacityError{LayerBytes: 1 << 30, RetentionCap: 1 << 20}, ep.CodeDeclined},
		{"replay with nothing captured", fmt.Errorf("ep: %w", graphs.ErrNotInstalled), ep.CodeWrongState},
		{"end without begin", fmt.Errorf("ep: %w", graphs.ErrNotCapturing), ep.CodeWrongState},
		{"reset during capture", fmt.Errorf("ep: %w", graphs.ErrCaptureActive), ep.CodeWrongState},
		{"end on the wrong thread", fmt.Errorf("ep: %w", graphs.ErrWrongThread), ep.CodeWrongState},
		{"drain inside capture", fmt.Errorf("ep: %w", graphs.ErrDrainInCapture), ep.CodeWrongState},
		{"invalidated capture wrapping the driver's error", fmt.Errorf("%w: %w", graphs.ErrCaptureInvalidated,
			&cudadrv.Error{Op: "cuStreamEndCapture", Result: cudadrv.ErrorStreamCaptureInvalidated}), ep.CodeWrongState},
		{"capture window", fmt.Errorf("ep: %w", ep.ErrCaptureLive), ep.CodeWrongState},
		{"a thread capturing for another provider", fmt.Errorf("ep: %w", ep.ErrThreadCaptures), ep.CodeWrongState},
		{"audit rejection", fmt.Errorf("ep: %w", graphs.ErrRejected), ep.CodeUnsupported},
		{"unsupported kernel", fmt.Errorf("ep: %w", kernels.ErrUnsupported), ep.CodeUnsupported},
		{"tensor mismatch", fmt.Errorf("ep: %w", kernels.ErrTensorMismatch), ep.CodeInvalidArgument},
		{"bad launch", fmt.Errorf("ep: %w", ep.ErrInvalidLaunch), ep.CodeInvalidArgument},
		{"segment index", fmt.Errorf("ep: %w", graphs.ErrSegmentIndex), ep.CodeInvalidArgument},
		{"bad weight", fmt.Errorf("ep: %w", paging.ErrInvalidWeight), ep.CodeInvalidArgument},
		{"region past the file", &paging.RegionError{Reason: "past end of file"}, ep.CodeInvalidArgument},
		{"layer too large", &paging.LayerSizeError{LayerBytes: 2, Capacity: 1}, ep.CodeInvalidArgument},
		{"missing file", fmt.Errorf("open: %w", fs.ErrNotExist), ep.CodeNotFound},
		{"both slots busy", fmt.Errorf("x: %w", paging.ErrNoFreeSlot), ep.CodeWrongState},
		{"page not prefetched", fmt.Errorf("x: %w", paging.ErrNotPrefetched), ep.CodeWrongState},
		{"slot state", &paging.SlotStateError{Op: "release"}, ep.CodeWrongState},
		{"failed fill", &paging.FillError{Err: &cudadrv.Error{Op: "cuMemcpyHtoDAsync_v2", Result: cudadrv.ErrorLaunchFailed}}, ep.CodeDriver},
		{"quarantined slot", fmt.Errorf("x: %w", paging.ErrQuarantined), ep.CodeWrongState},
		{"file in use", fmt.Errorf("x: %w", paging.ErrFileBusy), ep.CodeWrongState},
		{"unloaded module", fmt.Errorf("x: %w", ep.ErrUnloaded), ep.CodeWrongState},
		{"anything else", errors.New("surprise"), ep.CodeFail},
	}
	seen := map[ep.ErrorCode]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ep.Code(tt.err), "got %v", ep.Code(tt.err))
		})
		seen[tt.want] = true
	}
	for _, c := range ep.Codes() {
		assert.True(t, seen[c], "no case for code %v", c)
		assert.NotEqual(t, "UNKNOWN", c.String())
	}
}
