package paging

import (
	"errors"
	"fmt"
)

// Sentinel errors. Wrapped errors carry context; compare with errors.Is.
var (
	// ErrClosed is returned by any operation on a closed pipeline, transfer, pool, residency or
	// source.
	ErrClosed = errors.New("paging: closed")

	// ErrNoFreeSlot is returned by a prefetch when no slot can take a new layer: every slot
	// holds a layer that is being filled, waiting to be consumed or in use, or is quarantined
	// (until DoubleBuffer.Recover resets it).
	ErrNoFreeSlot = errors.New("paging: no free slot")

	// ErrForeignTicket is returned when a ticket issued by another pipeline is presented.
	ErrForeignTicket = errors.New("paging: ticket belongs to another pipeline")

	// ErrQuarantined is returned for a ticket whose slot was quarantined after its fill failed.
	ErrQuarantined = errors.New("paging: slot quarantined")

	// ErrFileBusy is returned by MmapSource.Close for the last reference to a file that a fill
	// may still be reading, or whose pages are still registered with the driver: unmapping it
	// then would pull the bytes from under a copy. Nothing is changed; close it again once the
	// layers read from it have been waited for and released (or their pipeline closed).
	ErrFileBusy = errors.New("paging: external-data file in use")

	// ErrNotPrefetched is returned by Residency.Page for a layer that was not routed through
	// the pipeline (declined, failed, already paged or cancelled).
	ErrNotPrefetched = errors.New("paging: layer was not prefetched")

	// ErrReleased is returned by a second PagedWeight.Release.
	ErrReleased = errors.New("paging: paged weight already released")

	// ErrDeclined matches a *PoolCapacityError with errors.Is: a pipeline too large for the
	// staging pool is declined, not failed. Residency.Prefetch does not return its declines
	// as errors: it returns them as a Decline value beside a nil error.
	ErrDeclined = errors.New("paging: declined")

	// ErrStaleGeneration matches every *StaleGenerationError with errors.Is.
	ErrStaleGeneration = errors.New("paging: stale ticket generation")
)

// StaleGenerationError refuses a ticket whose slot has since been claimed for another layer.
// The ticket's layer is never served the newer layer's bytes.
type StaleGenerationError struct {
	Layer      LayerID // the layer the stale ticket was issued for
	Slot       int     // its slot
	TicketGen  uint64  // generation the ticket carries
	CurrentGen uint64  // generation of the slot now
}

// Error names the layer, slot and both generations.
func (e *StaleGenerationError) Error() string {
	return fmt.Sprintf("paging: stale ticket for layer %d: slot %d is at generation %d, ticket has %d",
		e.Layer, e.Slot, e.CurrentGen, e.TicketGen)
}

// Is matches ErrStaleGeneration.
func (e *StaleGenerationError) Is(target error) bool { return target == ErrStaleGeneration }

// SlotStateError refuses an operation that the ticket's slot state does not allow, such as
// releasing a layer that was never waited for.
type SlotStateError struct {
	Op    string    // "wait", "release", "cancel"
	Layer LayerID   // the ticket's layer
	Slot  int       // its slot
	State SlotState // the slot's state
}

// Error names the operation, layer, slot and state.
func (e *SlotStateError) Error() string {
	return fmt.Sprintf("paging: cannot %s layer %d: slot %d is %s", e.Op, e.Layer, e.Slot, e.State)
}

// FillError is a failed fill: the transfer could not land the layer's bytes in its slot. The
// slot is quarantined (not handed out again until DoubleBuffer.Recover or Residency.Recover
// resets it); the pipeline keeps serving with the other.
type FillError struct {
	Layer LayerID // the layer whose fill failed
	Slot  int     // the slot now quarantined
	Err   error   // the transfer's error, typically a *cudadrv.Error
}

// Error names the layer and slot and wraps the cause.
func (e *FillError) Error() string {
	return fmt.Sprintf("paging: fill of layer %d into slot %d failed, slot quarantined: %v", e.Layer, e.Slot, e.Err)
}

// Unwrap returns the transfer's error.
func (e *FillError) Unwrap() error { return e.Err }

// Is matches ErrQuarantined.
func (e *FillError) Is(target error) bool { return target == ErrQuarantined }

// PoolCapacityError declines building a pipeline whose slots are too large for two staging
// buffers to be retained at once under the staging pool's retention cap. It is returned before
// anything is reserved.
//
// A staging buffer pins whole host pages, so what must fit is two buffers of LayerBytes
// rounded up to whole pages (StagingBytes each): 2 × StagingBytes ≤ RetentionCap.
type PoolCapacityError struct {
	LayerBytes   uint64 // the requested slot size
	RetentionCap uint64 // the pool's cap
	// StagingBytes is the pinned size of one staging buffer for LayerBytes (whole host pages);
	// 0 when LayerBytes is too large to round.
	StagingBytes uint64
	// PageBytes is the host page size the buffers are rounded to.
	PageBytes uint64
}

// MaxLayerBytes is the largest slot the pool admits: two such staging buffers fit the cap.
func (e *PoolCapacityError) MaxLayerBytes() uint64 {
	half := e.RetentionCap / SlotCount
	if e.PageBytes == 0 {
		return half
	}
	return half / e.PageBytes * e.PageBytes
}

// Error names the sizes: the layer's, the pinned size of its staging buffer, and the cap.
func (e *PoolCapacityError) Error() string {
	if e.StagingBytes == 0 || e.PageBytes == 0 {
		return fmt.Sprintf("paging: layer of %d bytes declined: two staging buffers of it exceed the pinned pool's retention cap of %d bytes (the largest layer it admits is %d bytes)",
			e.LayerBytes, e.RetentionCap, e.MaxLayerBytes())
	}
	return fmt.Sprintf("paging: layer of %d bytes declined: two staging buffers of %d bytes each (%d rounded up to whole %d-byte host pages) exceed the pinned pool's retention cap of %d bytes (the largest layer it admits is %d bytes)",
		e.LayerBytes, e.StagingBytes, e.LayerBytes, e.PageBytes, e.RetentionCap, e.MaxLayerBytes())
}

// Is matches ErrDeclined: a pool-capacity refusal is a decline, the layer goes the ordinary way.
func (e *PoolCapacityError) Is(target error) bool { return target == ErrDeclined }

// LayerSizeError refuses a layer whose image does not fit the pipeline's slots.
type LayerSizeError struct {
	Layer      LayerID // the layer refused
	LayerBytes uint64  // its image size
	Capacity   uint64  // the slot size
}

// Error names the layer and both sizes.
func (e *LayerSizeError) Error() string {
	return fmt.Sprintf("paging: layer %d of %d bytes does not fit the %d-byte slots", e.Layer, e.LayerBytes, e.Capacity)
}
