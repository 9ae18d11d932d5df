package paging_test

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/paging"
)

// fakeTransfer is a deterministic Transfer for the state machine's CPU tests: slot memory is
// host memory, a fill's bytes are captured at Fill and land in the slot only when the test
// completes the copy (the "device" advances only when told), and the fences are checked:
// a reuse fill before the slot's release fence, overwriting a slot that is fenced and not
// released, or closing with a copy in flight undrained are recorded as violations.
type fakeTransfer struct {
	mu sync.Mutex

	retainCap uint64 // Admit declines slotBytes*slots above this (0: no gate)
	calls     []string

	reserved  bool
	closed    bool
	slotBytes uint64
	mem       [][]byte
	queued    [][]byte // the copy in flight per slot, nil when none
	fenced    []bool   // compute waits on the slot and has not released it
	releaseOK []bool   // a release fence is recorded since the last fill
	fills     []int

	failFill     error // the next Fill fails with it (after queuing part of the copy)
	failFillDone error // the next FillDone of a pending copy fails with it
	failFence    error
	failRelease  error
	failRecover  error
	violations   []string
}

func newFake() *fakeTransfer { return &fakeTransfer{} }

const fakeBase = cudadrv.DevicePtr(0x7000_0000_0000)

func (f *fakeTransfer) log(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeTransfer) Admit(slotBytes uint64, slots int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("admit %d", slotBytes)
	if f.retainCap != 0 && slotBytes*uint64(slots) > f.retainCap {
		return &paging.PoolCapacityError{LayerBytes: slotBytes, RetentionCap: f.retainCap}
	}
	return nil
}

func (f *fakeTransfer) Reserve(slotBytes uint64, slots int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("reserve %d", slotBytes)
	f.reserved, f.slotBytes = true, slotBytes
	f.mem = make([][]byte, slots) // allocated at the first fill: a reserve may be huge
	f.queued = make([][]byte, slots)
	f.fenced = make([]bool, slots)
	f.releaseOK = make([]bool, slots)
	f.fills = make([]int, slots)
	return nil
}

func (f *fakeTransfer) SlotPtr(slot int) cudadrv.DevicePtr {
	return fakeBase + cudadrv.DevicePtr(slot)*0x1000_0000
}

func (f *fakeTransfer) Fill(slot int, req *paging.FillRequest) (paging.FillResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("fill %d layer %d reuse=%v", slot, req.Layer, req.Reuse)
	if f.fills[slot] > 0 && !f.releaseOK[slot] {
		f.violations = append(f.violations, fmt.Sprintf("slot %d refilled without a release fence", slot))
	}
	if f.fenced[slot] {
		f.violations = append(f.violations, fmt.Sprintf("slot %d refilled while compute may read it", slot))
	}
	if req.Reuse != (f.fills[slot] > 0) {
		f.violations = append(f.violations, fmt.Sprintf("slot %d: reuse=%v after %d fills", slot, req.Reuse, f.fills[slot]))
	}
	f.fills[slot]++
	if f.mem[slot] == nil {
		f.mem[slot] = make([]byte, f.slotBytes)
		for j := range f.mem[slot] {
			f.mem[slot][j] = 0xEE // stale garbage, never a valid image
		}
	}
	f.releaseOK[slot] = false
	img := make([]byte, 0, req.Weight.Bytes())
	for _, s := range req.Segments {
		img = append(img, s.Src...)
	}
	if f.failFill != nil {
		err := f.failFill
		f.failFill = nil
		f.queued[slot] = img[:len(img)/2] // a partial copy was queued before the failure
		return paging.FillResult{}, err
	}
	f.queued[slot] = img
	return paging.FillResult{Path: paging.PathStaging}, nil
}

// Recover lets the failed fill's partial copy land and the compute that may read the slot
// finish (the host waits for both), then forgets the slot's history: its next fill is a
// first fill.
func (f *fakeTransfer) Recover(slot int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("recover %d", slot)
	if err := f.failRecover; err != nil {
		f.failRecover = nil
		return err
	}
	if q := f.queued[slot]; q != nil {
		copy(f.mem[slot], q)
		f.queued[slot] = nil
	}
	f.fenced[slot], f.releaseOK[slot], f.fills[slot] = false, false, 0
	return nil
}

// complete runs slot's queued copy on the fake device.
func (f *fakeTransfer) complete(slot int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.queued[slot]; q != nil {
		copy(f.mem[slot], q)
		f.queued[slot] = nil
	}
}

func (f *fakeTransfer) FillDone(slot int) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queued[slot] == nil {
		return true, nil
	}
	if err := f.failFillDone; err != nil {
		f.failFillDone = nil
		return false, err
	}
	return false, nil
}

func (f *fakeTransfer) Fence(slot int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("fence %d", slot)
	if err := f.failFence; err != nil {
		f.failFence = nil
		return err
	}
	// Compute now waits for the copy: on this device that means the copy runs first.
	if q := f.queued[slot]; q != nil {
		copy(f.mem[slot], q)
		f.queued[slot] = nil
	}
	f.fenced[slot] = true
	return nil
}

func (f *fakeTransfer) Release(slot int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("release %d", slot)
	if err := f.failRelease; err != nil {
		f.failRelease = nil
		return err
	}
	f.fenced[slot] = false
	f.releaseOK[slot] = true
	return nil
}

func (f *fakeTransfer) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("close")
	if f.closed {
		return errors.New("fake: closed twice")
	}
	f.closed = true
	for i := range f.queued {
		f.queued[i] = nil // drained
		if f.fenced[i] {
			f.violations = append(f.violations, fmt.Sprintf("slot %d freed while compute may read it", i))
		}
	}
	return nil
}

// slotMem returns a copy of slot's first n bytes of memory.
func (f *fakeTransfer) slotMem(slot int, n uint64) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]byte(nil), f.mem[slot][:n]...)
}

func (f *fakeTransfer) slotOf(p cudadrv.DevicePtr) int { return int((p - fakeBase) / 0x1000_0000) }

func (f *fakeTransfer) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeTransfer) problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.violations...)
}
