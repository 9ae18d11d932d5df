package ep

import (
	"errors"
	"fmt"
	"time"
)

// defaultSpinBudget bounds how long SynchronizeCompute spins on the completion word before it
// hands the wait to the driver (cuStreamSynchronize). A decode step of tens of kernels is done
// in tens of microseconds; work that takes longer pays one extra driver call after the spin,
// which is small beside a millisecond. While it spins the calling thread burns its CPU, as the
// driver's own default spin-wait does inside cuStreamSynchronize.
const defaultSpinBudget = time.Millisecond

// startWait sets up how SynchronizeCompute waits (Options.WaitMode): for spin, and for auto
// where the device can, a completion word written from the compute stream. It runs in start,
// with the context bound.
func (p *Provider) startWait() error {
	p.spinBudget = defaultSpinBudget
	mode := p.opts.waitMode()
	if mode == WaitBlock {
		p.waitMode = WaitBlock
		return nil
	}
	err := p.openWord()
	switch {
	case err == nil:
		p.waitMode = WaitSpin
		if mode == WaitAuto {
			p.waitReason = "auto chose spin: the compute stream writes a host-mapped word"
		}
		return nil
	case mode == WaitSpin:
		return fmt.Errorf("ep: wait_mode=spin: %w", err)
	}
	p.waitMode = WaitBlock
	p.waitReason = "auto chose block: " + err.Error()
	return nil
}

// openWord allocates the completion word and proves the round trip once: the compute stream
// writes it and the host reads the value after a driver synchronization. A device or driver
// without stream memory operations on mapped memory fails here, not in a wait.
func (p *Provider) openWord() error {
	w, err := p.compute.NewCompletionWord()
	if err != nil {
		return fmt.Errorf("allocate a host-mapped completion word: %w", err)
	}
	seq, err := w.Signal()
	if err == nil {
		err = p.compute.Synchronize()
	}
	if err == nil && !w.Reached(seq) {
		err = fmt.Errorf("the compute stream wrote %d to the host-mapped word, the host reads %d", seq, w.Value())
	}
	if err != nil {
		return errors.Join(fmt.Errorf("write a host-mapped completion word from the compute stream: %w", err), w.Free())
	}
	p.word = w
	return nil
}

// WaitMode returns how SynchronizeCompute waits: WaitSpin or WaitBlock (what wait_mode=auto
// chose).
func (p *Provider) WaitMode() string { return p.waitMode }

// WaitModeReason says why wait_mode=auto chose the mode it did, or "" for an explicit mode.
func (p *Provider) WaitModeReason() string { return p.waitReason }

// SynchronizeCompute waits for the work queued on the provider's compute stream (kernels,
// replays, copies) before the call — not for the whole device, and without the capture gate.
// It is how a host waits for a replayed step.
//
// With WaitMode WaitSpin it queues a write of the next sequence number into a host-mapped
// pinned word behind that work (cuStreamWriteValue32) and spins on the word (see
// cudadrv.CompletionWord); the work's results are visible when the number arrives. A spin
// that outlasts its budget (1 ms), or a fault that keeps the number from arriving, hands over
// to the driver's stream synchronization, which reports the fault. With WaitBlock it is the
// driver's stream synchronization alone (cuStreamSynchronize). It allocates nothing, and it
// binds the provider's context only when a call is refused, as Replay does (see there).
//
// # Errors
//
// While a capture is live on the provider it is refused with ErrCaptureLive (synchronizing a
// capturing stream would invalidate the capture). A fault of the awaited work, or a sticky
// error already recorded in the context, is a driver error. Bad device data met by a kernel of
// the awaited work (or earlier, not yet reported) is reported once the wait is over, as an
// error wrapping ErrDataFault that names the node, the input and the value (TakeDataFault).
func (p *Provider) SynchronizeCompute() error {
	e, err := p.enterUnbound("synchronize the compute stream", accessDriver)
	if err != nil {
		return err
	}
	err = p.waitCompute()
	if err != nil {
		err = p.rebound("synchronize the compute stream", err, p.waitCompute)
	}
	if err == nil {
		err = p.TakeDataFault()
	}
	e.leave()
	return err
}

// waitCompute is SynchronizeCompute's wait, inside the window.
func (p *Provider) waitCompute() error {
	w := p.word
	if w == nil {
		return p.compute.Synchronize()
	}
	seq, err := w.Signal()
	if err != nil {
		return err
	}
	if w.Spin(seq, p.spinBudget) {
		// The number arrived, so the awaited work ran to its end: a fault in it would have
		// stopped the context before the write. A fault recorded since by any call is still
		// reported, as the driver's synchronization would.
		return p.ctx.StickyError()
	}
	return p.compute.Synchronize()
}

// closeWord frees the completion word; teardown calls it after destroying the compute stream.
// No write to the word is pending then: every SynchronizeCompute waits for the write it
// queued (or for a stream synchronization past it) before it returns, and Close waits for the
// calls in flight.
func (p *Provider) closeWord() error {
	if p.word == nil {
		return nil
	}
	w := p.word
	p.word = nil
	return w.Free()
}
