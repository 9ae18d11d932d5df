package sim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/sim"
)

func TestEventCompletesWhenTheWorkerReachesIt(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	ev := e.event(0)
	require.NoError(t, e.d.EventQuery(ev), "a never-recorded event is complete")
	require.NoError(t, e.d.EventSynchronize(ev))

	g := newGate(t)
	e.launchGate(s, g)
	require.NoError(t, e.d.EventRecord(ev, s))
	<-g.started
	requireResult(t, e.d.EventQuery(ev), cudadrv.ErrorNotReady)
	g.open()
	require.NoError(t, e.d.EventSynchronize(ev))
	require.NoError(t, e.d.EventQuery(ev))
}

func TestStreamWaitEventOrdersStreams(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s1, s2 := e.stream(), e.stream()
	p := e.alloc(32)
	e.put(p, pattern(32, 6))
	ev := e.event(cudadrv.EventDisableTiming)
	g := newGate(t)
	e.launchGate(s1, g)
	require.NoError(t, e.launchTouch(s1, p, 32))
	require.NoError(t, e.d.EventRecord(ev, s1))
	require.NoError(t, e.d.StreamWaitEvent(s2, ev))
	host := make([]byte, 32)
	require.NoError(t, e.d.MemcpyDtoHAsync(host, p, s2))
	<-g.started
	requireResult(t, e.d.StreamQuery(s2), cudadrv.ErrorNotReady, "s2 waits behind s1's gate")
	g.open()
	require.NoError(t, e.d.StreamSynchronize(s2))
	assert.Equal(t, plusOne(pattern(32, 6)), host, "s2 read after s1's kernel")
}

func TestStreamWaitEventUsesTheRecordCurrentAtTheWait(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s1, s2 := e.stream(), e.stream()
	p := e.alloc(8)
	e.put(p, pattern(8, 1))
	ev := e.event(0)
	first, second := newGate(t), newGate(t)
	e.launchGate(s1, first)
	require.NoError(t, e.d.EventRecord(ev, s1))
	require.NoError(t, e.d.StreamWaitEvent(s2, ev))
	require.NoError(t, e.launchTouch(s2, p, 8))
	e.launchGate(s1, second)
	require.NoError(t, e.d.EventRecord(ev, s1)) // re-record: later waits would see this one

	first.open()
	<-second.started
	require.NoError(t, e.d.StreamSynchronize(s2), "s2 waited for the first record only")
	assert.Equal(t, plusOne(pattern(8, 1)), e.get(p, 8))
	requireResult(t, e.d.EventQuery(ev), cudadrv.ErrorNotReady, "the query sees the second record")
	second.open()
	require.NoError(t, e.d.EventSynchronize(ev))
}

func TestEventElapsedTime(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s := e.stream()
	start, end := e.event(0), e.event(0)
	noTiming := e.event(cudadrv.EventDisableTiming)
	unrecorded := e.event(0)

	require.NoError(t, e.d.EventRecord(start, s))
	require.NoError(t, e.launchTouch(s, e.alloc(4), 4))
	require.NoError(t, e.d.EventRecord(end, s))
	require.NoError(t, e.d.EventRecord(noTiming, s))
	require.NoError(t, e.d.EventSynchronize(end))
	ms, err := e.d.EventElapsedTime(start, end)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ms, float32(0), "end was recorded after start on one stream")

	g := newGate(t)
	pending := e.event(0)
	e.launchGate(s, g)
	require.NoError(t, e.d.EventRecord(pending, s))
	<-g.started

	tests := []struct {
		name       string
		start, end cudadrv.RawEvent
		want       cudadrv.Result
	}{
		{"disable timing end", start, noTiming, cudadrv.ErrorInvalidHandle},
		{"disable timing start", noTiming, end, cudadrv.ErrorInvalidHandle},
		{"never recorded", unrecorded, end, cudadrv.ErrorInvalidHandle},
		{"not complete", start, pending, cudadrv.ErrorNotReady},
		{"destroyed or unknown", start, 0xbad, cudadrv.ErrorInvalidHandle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.bind(t)
			_, err := e.d.EventElapsedTime(tt.start, tt.end)
			requireResult(t, err, tt.want)
		})
	}
	g.open()
	require.NoError(t, e.d.EventSynchronize(pending))
	_, err = e.d.EventElapsedTime(start, pending)
	require.NoError(t, err)
}

func TestEventHandlesAndFlags(t *testing.T) {
	e := newEnv(t, sim.Options{})
	_, err := e.d.EventCreate(0x40)
	requireResult(t, err, cudadrv.ErrorInvalidValue)
	_, err = e.d.EventCreate(0x4) // interprocess needs disable-timing
	requireResult(t, err, cudadrv.ErrorInvalidValue)
	_, err = e.d.EventCreate(0x4 | cudadrv.EventDisableTiming)
	require.NoError(t, err)
	ev := e.event(cudadrv.EventBlockingSync)
	require.NoError(t, e.d.EventDestroy(ev))
	requireResult(t, e.d.EventDestroy(ev), cudadrv.ErrorInvalidHandle, "destroy twice")
	requireResult(t, e.d.EventRecord(ev, 0), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.d.EventQuery(ev), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.d.StreamWaitEvent(0, ev), cudadrv.ErrorInvalidHandle)
	requireResult(t, e.d.EventSynchronize(0), cudadrv.ErrorInvalidHandle)
}

func TestEventRecordedOnDestroyedStreamStaysComplete(t *testing.T) {
	e := newEnv(t, sim.Options{})
	s1, s2 := e.stream(), e.stream()
	ev := e.event(0)
	require.NoError(t, e.d.EventRecord(ev, s1))
	require.NoError(t, e.d.StreamDestroy(s1))
	require.NoError(t, e.d.EventQuery(ev))
	require.NoError(t, e.d.StreamWaitEvent(s2, ev))
	require.NoError(t, e.d.StreamSynchronize(s2))
}
