package cudadrv

import (
	"errors"
	"sync/atomic"
	"time"
)

// Event marks a point in a stream's work. Safe for concurrent use.
type Event struct {
	ctx       *Context
	raw       RawEvent
	destroyed atomic.Bool
}

var errNilEvent = errors.New("cudadrv: nil event")

// NewEvent creates an event. Pass EventDisableTiming for events used only for ordering
// (cheaper); ElapsedSince needs timing events.
func (c *Context) NewEvent(flags EventFlags) (*Event, error) {
	raw, err := c.b.EventCreate(flags)
	if err != nil {
		return nil, c.note(err)
	}
	c.count.eventsCreated.Add(1)
	return &Event{ctx: c, raw: raw}, nil
}

// Raw returns the driver's event handle.
func (e *Event) Raw() RawEvent { return e.raw }

func (e *Event) live() error {
	if e == nil {
		return errNilEvent
	}
	if e.destroyed.Load() {
		return ErrDestroyed
	}
	return nil
}

// Record captures the work queued on s so far; the event completes when that work has. It
// allocates nothing.
func (e *Event) Record(s *Stream) error {
	if err := e.live(); err != nil {
		return err
	}
	if err := s.live(); err != nil {
		return err
	}
	return e.ctx.note(e.ctx.b.EventRecord(e.raw, s.raw))
}

// Query reports whether the event has completed, without blocking.
func (e *Event) Query() (bool, error) {
	if err := e.live(); err != nil {
		return false, err
	}
	err := e.ctx.b.EventQuery(e.raw)
	if err == nil {
		return true, nil
	}
	if ResultOf(err) == ErrorNotReady {
		return false, nil
	}
	return false, e.ctx.note(err)
}

// Synchronize blocks until the event has completed.
func (e *Event) Synchronize() error {
	if err := e.live(); err != nil {
		return err
	}
	return e.ctx.note(e.ctx.b.EventSynchronize(e.raw))
}

// ElapsedSince returns the device time between start's completion and e's. Both must be
// timing events that have completed.
func (e *Event) ElapsedSince(start *Event) (time.Duration, error) {
	if err := e.live(); err != nil {
		return 0, err
	}
	if err := start.live(); err != nil {
		return 0, err
	}
	ms, err := e.ctx.b.EventElapsedTime(start.raw, e.raw)
	if err != nil {
		return 0, e.ctx.note(err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Destroy destroys the event; a second call returns ErrDestroyed.
func (e *Event) Destroy() error {
	if e == nil {
		return errNilEvent
	}
	if !e.destroyed.CompareAndSwap(false, true) {
		return ErrDestroyed
	}
	if err := e.ctx.b.EventDestroy(e.raw); err != nil {
		return e.ctx.note(err)
	}
	e.ctx.count.eventsDestroyed.Add(1)
	return nil
}
