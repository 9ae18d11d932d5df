package ep_test

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv/drivertest"
	"github.com/cudaep/cudaep/cudadrv/sim"
	"github.com/cudaep/cudaep/ep"
	"github.com/cudaep/cudaep/graphs"
)

// Providers on several devices: peer copies on every path, and the isolation of providers on
// different devices. On the simulator the tests ask for as many devices as they need (and the
// peer matrix they need); on the GPU they skip when the machine has fewer GPUs, naming what
// they need.

// newProviders opens one provider on each of the devices 0..n-1. On the simulator the machine
// has n devices whose peer matrix is peers (nil: every pair reaches each other) and opts' other
// fields; on the GPU the test skips unless there are n GPUs.
func newProviders(t *testing.T, n int, peers func(d, p int) bool, opts sim.Options, mutate ...func(*ep.Options)) []*ep.Provider {
	t.Helper()
	if drivertest.BackendName() == "sim" {
		opts.Devices, opts.PeerAccess = n, peers
		ep.UseSimOptions(t, opts)
	} else {
		infos, _, _, err := ep.ListDevices(drivertest.BackendName())
		require.NoError(t, err)
		if len(infos) < n {
			t.Skipf("needs %d CUDA devices, this machine has %d (the multi-GPU suites run on a machine with %d GPUs)", n, len(infos), n)
		}
	}
	ps := make([]*ep.Provider, n)
	for i := range ps {
		ps[i] = newProvider(t, append([]func(*ep.Options){func(o *ep.Options) { o.DeviceID = i }}, mutate...)...)
	}
	return ps
}

// filled allocates n bytes on p holding pattern(n, seed).
func filled(t *testing.T, p *ep.Provider, n int, seed byte) *ep.Buffer {
	t.Helper()
	b := alloc(t, p, uint64(n))
	require.NoError(t, p.CopyToDevice(b, 0, pattern(n, seed)))
	return b
}

// pattern returns n non-zero bytes that differ between seeds.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((i*131+int(seed)*17+7)%251) + 1
	}
	return b
}

// readBack reads all of b through its owner p.
func readBack(t *testing.T, p *ep.Provider, b *ep.Buffer) []byte {
	t.Helper()
	out := make([]byte, b.Size())
	require.NoError(t, p.CopyToHost(out, b, 0))
	return out
}

// wantPath is the path a copy from src's device to dst's device takes: direct when dst's
// device can access src's, as the backend says.
func wantPath(t *testing.T, dst, src *ep.Provider) ep.PeerPath {
	t.Helper()
	if dst.Device().Ordinal == src.Device().Ordinal {
		return ep.PeerPathDevice
	}
	can, err := ep.ContextOf(dst).Device().CanAccessPeer(ep.ContextOf(src).Device())
	require.NoError(t, err)
	if can {
		return ep.PeerPathDirect
	}
	return ep.PeerPathStaged
}

func TestCopyPeerBetweenTwoDevicesIsByteExact(t *testing.T) {
	ps := newProviders(t, 2, nil, sim.Options{})
	const n = 3<<20 + 123
	for _, c := range []struct {
		name     string
		dst, src int // device of each buffer
		via      int // device of the provider called
	}{
		{"pull 1→0 called on the destination", 0, 1, 0},
		{"push 1→0 called on the source", 0, 1, 1},
		{"pull 0→1 called on the destination", 1, 0, 1},
		{"push 0→1 called on the source", 1, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			seed := byte(10*c.dst + c.src + 3*c.via)
			src := filled(t, ps[c.src], n, seed)
			dst := filled(t, ps[c.dst], n+4096, seed+100)
			path, err := ps[c.via].CopyPeer(dst, 1000, src, 17, n-17)
			require.NoError(t, err)
			if drivertest.BackendName() == "sim" {
				assert.Equal(t, ep.PeerPathDirect, path, "every simulated pair reaches each other by default")
			}
			assert.Equal(t, wantPath(t, ps[c.dst], ps[c.src]), path)
			want := pattern(n+4096, seed+100)
			copy(want[1000:], pattern(n, seed)[17:])
			assert.True(t, bytes.Equal(want, readBack(t, ps[c.dst], dst)), "destination bytes")
			assert.True(t, bytes.Equal(pattern(n, seed), readBack(t, ps[c.src], src)), "source unchanged")
		})
	}
	st := ps[0].PeerStats()
	assert.Equal(t, uint64(2*(n-17)), st.Bytes, "device 0 was the destination of two copies")
	if drivertest.BackendName() == "sim" {
		assert.Equal(t, uint64(2), st.Direct)
		assert.Equal(t, uint64(1), st.EnabledPeers, "peer access is enabled once per pair")
	}
}

func TestCopyPeerStagesBetweenDevicesThatCannotReachEachOther(t *testing.T) {
	if drivertest.BackendName() != "sim" {
		t.Skip("needs two devices without peer access: the simulator's peer matrix makes them (TestCopyPeerForcedPathsOnOneDevice stages on a GPU)")
	}
	none := func(int, int) bool { return false }
	ps := newProviders(t, 2, none, sim.Options{})
	const chunk = 4096
	for _, p := range ps {
		ep.SetPeerChunk(p, chunk)
	}
	for _, n := range []int{1, chunk - 1, chunk, 2 * chunk, 5*chunk + 77} {
		t.Run(fmt.Sprint(n, " bytes"), func(t *testing.T) {
			src := filled(t, ps[1], n, byte(n))
			dst := filled(t, ps[0], n, byte(n)+1)
			path, err := ps[0].CopyPeer(dst, 0, src, 0, uint64(n))
			require.NoError(t, err)
			assert.Equal(t, ep.PeerPathStaged, path)
			assert.Equal(t, pattern(n, byte(n)), readBack(t, ps[0], dst))

			back := filled(t, ps[1], n, byte(n)+2)
			path, err = ps[0].CopyPeer(back, 0, dst, 0, uint64(n)) // called on the source side
			require.NoError(t, err)
			assert.Equal(t, ep.PeerPathStaged, path)
			assert.Equal(t, pattern(n, byte(n)), readBack(t, ps[1], back))
		})
	}
	assert.Equal(t, uint64(5), ps[0].PeerStats().Staged)
	assert.Equal(t, uint64(5), ps[1].PeerStats().Staged)
	assert.Zero(t, ps[0].PeerStats().EnabledPeers, "no access is enabled for a staged copy")
}

// TestCopyPeerAcrossFourDevices copies between every ordered pair of four devices that form
// two islands (0-1 and 2-3 reach each other, no pair across): direct within an island, staged
// across, every byte right.
func TestCopyPeerAcrossFourDevices(t *testing.T) {
	islands := func(d, p int) bool { return d/2 == p/2 }
	ps := newProviders(t, 4, islands, sim.Options{})
	const n = 64<<10 + 5
	for _, p := range ps {
		ep.SetPeerChunk(p, 16<<10)
	}
	srcs := make([]*ep.Buffer, 4)
	for i, p := range ps {
		srcs[i] = filled(t, p, n, byte(40+i))
	}
	for d := range ps {
		for s := range ps {
			if d == s {
				continue
			}
			dst := filled(t, ps[d], n, 200)
			path, err := ps[d].CopyPeer(dst, 0, srcs[s], 0, n)
			require.NoError(t, err, "%d → %d", s, d)
			assert.Equal(t, wantPath(t, ps[d], ps[s]), path, "%d → %d", s, d)
			if drivertest.BackendName() == "sim" {
				want := ep.PeerPathStaged
				if islands(d, s) {
					want = ep.PeerPathDirect
				}
				assert.Equal(t, want, path, "%d → %d", s, d)
			}
			assert.True(t, bytes.Equal(pattern(n, byte(40+s)), readBack(t, ps[d], dst)), "%d → %d", s, d)
		}
	}
	if drivertest.BackendName() == "sim" {
		for d, p := range ps {
			st := p.PeerStats()
			assert.Equal(t, uint64(1), st.Direct, "device %d: one copy from its island partner", d)
			assert.Equal(t, uint64(2), st.Staged, "device %d: two copies from the other island", d)
			assert.Equal(t, uint64(1), st.EnabledPeers, "device %d", d)
		}
	}
}

// TestCopyPeerIsOrderedAgainstBothSides: the copy runs after the work queued so far on the
// source's compute stream, and the source's later work runs after the copy read its bytes.
// On the simulator copies take modelled time, so without either fence the copy would read the
// source too early or the source's next write would land before the copy read it.
func TestCopyPeerIsOrderedAgainstBothSides(t *testing.T) {
	for _, staged := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "staged"}[staged], func(t *testing.T) {
			var peers func(d, p int) bool
			if staged {
				peers = func(int, int) bool { return false }
			}
			// 64 MB/s: a MiB takes 16 ms on the simulated device.
			ps := newProviders(t, 2, peers, sim.Options{CopyBandwidth: 64 << 20})
			if staged {
				ep.ForcePeerPath(ps[0], ep.PeerPathStaged) // on a GPU pair that reaches each other too
				ep.SetPeerChunk(ps[0], 256<<10)
			}
			d, s := ps[0], ps[1]
			const n = 1 << 20
			src := filled(t, s, n, 1)
			scratch := filled(t, s, n, 2)
			later := filled(t, s, n, 3)
			final := filled(t, s, 4096, 4)
			dst := filled(t, d, n, 5)
			// Queue work on the source's stream that ends by writing pattern 3 into src...
			require.NoError(t, s.CopyBuffer(scratch, 0, src, 0, n))
			require.NoError(t, s.CopyBuffer(src, 0, scratch, 0, n))
			require.NoError(t, s.CopyBuffer(src, 0, later, 0, n))
			// ...copy src to the other device, then overwrite src's first 4 KiB at once.
			path, err := d.CopyPeer(dst, 0, src, 0, n)
			require.NoError(t, err)
			if staged {
				assert.Equal(t, ep.PeerPathStaged, path)
			}
			require.NoError(t, s.CopyBuffer(src, 0, final, 0, 4096))
			assert.True(t, bytes.Equal(pattern(n, 3), readBack(t, d, dst)), "the copy saw exactly the source's queued work")
			want := pattern(n, 3)
			copy(want, pattern(4096, 4))
			assert.True(t, bytes.Equal(want, readBack(t, s, src)))
		})
	}
}

// TestCopyPeerForcedPathsOnOneDevice runs the staged and the direct machinery between two
// providers of one device (the only pair a one-GPU machine has), and the device path.
func TestCopyPeerForcedPathsOnOneDevice(t *testing.T) {
	p, q := newProvider(t), newProvider(t)
	const n = 1<<20 + 333
	ep.SetPeerChunk(p, 128<<10)
	for _, path := range []ep.PeerPath{ep.PeerPathNone, ep.PeerPathStaged, ep.PeerPathDirect} {
		t.Run(path.String(), func(t *testing.T) {
			ep.ForcePeerPath(p, path)
			defer ep.ForcePeerPath(p, ep.PeerPathNone)
			seed := byte(path) * 3
			src := filled(t, q, n, seed)
			dst := filled(t, p, n, seed+1)
			got, err := p.CopyPeer(dst, 0, src, 0, n)
			require.NoError(t, err)
			if path == ep.PeerPathNone {
				assert.Equal(t, ep.PeerPathDevice, got, "one device: an ordinary device copy")
			} else {
				assert.Equal(t, path, got)
			}
			assert.True(t, bytes.Equal(pattern(n, seed), readBack(t, p, dst)))
			// The reverse direction (p takes the destination side again: it runs on the
			// destination's device, which is the source's too).
			back := filled(t, q, n, seed+2)
			_, err = p.CopyPeer(back, 0, dst, 0, n)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(pattern(n, seed), readBack(t, q, back)))
		})
	}
	st := p.PeerStats()
	assert.Equal(t, uint64(2), st.Device)
	assert.Equal(t, uint64(2), st.Staged)
	assert.Equal(t, uint64(2), st.Direct)
	assert.Zero(t, st.EnabledPeers, "one device needs no peer access")
}

func TestCopyPeerWithinOneProvider(t *testing.T) {
	p := newProvider(t)
	a := filled(t, p, 8192, 7)
	b := filled(t, p, 8192, 8)
	path, err := p.CopyPeer(b, 100, a, 200, 4000)
	require.NoError(t, err)
	assert.Equal(t, ep.PeerPathDevice, path)
	want := pattern(8192, 8)
	copy(want[100:], pattern(8192, 7)[200:4200])
	assert.Equal(t, want, readBack(t, p, b))

	path, err = p.CopyPeer(a, 64, a, 64, 128)
	require.NoError(t, err)
	assert.Equal(t, ep.PeerPathDevice, path, "the same bytes: nothing to move")
	_, err = p.CopyPeer(a, 0, a, 64, 128)
	assert.ErrorIs(t, err, ep.ErrInvalidArgument, "overlapping ranges")
	path, err = p.CopyPeer(a, 0, b, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, ep.PeerPathNone, path, "zero bytes")
}

func TestCopyPeerRefusesBadInputBeforeTheDriver(t *testing.T) {
	ps := newProviders(t, 2, nil, sim.Options{})
	src := filled(t, ps[1], 4096, 1)
	dst := filled(t, ps[0], 4096, 2)
	gone := filled(t, ps[1], 4096, 3)
	require.NoError(t, gone.Release())
	for _, c := range []struct {
		name           string
		dst            *ep.Buffer
		dOff, sOff, n  uint64
		src            *ep.Buffer
		want           error
		wantInMessages string
	}{
		{"destination range past the end", dst, 1, 0, 4096, src, nil, "outside"},
		{"source range past the end", dst, 0, 4000, 100, src, nil, "outside"},
		{"offset overflows", dst, math.MaxUint64, 0, 2, src, nil, "outside"},
		{"size overflows", dst, 0, 0, math.MaxUint64, src, nil, "outside"},
		{"released source", dst, 0, 0, 16, gone, ep.ErrReleased, ""},
		{"nil destination", nil, 0, 0, 16, src, ep.ErrInvalidArgument, ""},
		{"nil source", dst, 0, 0, 16, nil, ep.ErrInvalidArgument, ""},
	} {
		path, err := ps[0].CopyPeer(c.dst, c.dOff, c.src, c.sOff, c.n)
		require.Error(t, err, c.name)
		assert.Equal(t, ep.PeerPathNone, path, c.name)
		if c.want != nil {
			assert.ErrorIs(t, err, c.want, c.name)
		}
		assert.Contains(t, err.Error(), c.wantInMessages, c.name)
	}
	assert.Equal(t, pattern(4096, 2), readBack(t, ps[0], dst), "nothing was copied")
	assert.Zero(t, ps[0].PeerStats().Bytes)
}

func TestCopyPeerRefusesAProviderOnNeitherDevice(t *testing.T) {
	ps := newProviders(t, 3, nil, sim.Options{})
	src := filled(t, ps[1], 256, 1)
	dst := filled(t, ps[0], 256, 2)
	_, err := ps[2].CopyPeer(dst, 0, src, 0, 256)
	assert.ErrorIs(t, err, ep.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "runs on device 2")
}

// TestCopyPeerDuringACaptureIsRefusedOnEitherSide: a peer copy cannot be recorded (its
// cross-device fences would not replay); a capture on either side refuses it before the
// driver, and the capture survives.
func TestCopyPeerDuringACaptureIsRefusedOnEitherSide(t *testing.T) {
	ps := newProviders(t, 2, nil, sim.Options{})
	for capturing := range ps {
		x := upload(t, ps[capturing], drivertest.RandomFloat32(64))
		y := alloc(t, ps[capturing], x.Size())
		src := filled(t, ps[1], 256, 1)
		dst := filled(t, ps[0], 256, 2)
		captureRelu(t, ps[capturing], graphs.Primary, x, y)
		_, err := ps[0].CopyPeer(dst, 0, src, 0, 256)
		assert.ErrorIs(t, err, ep.ErrCaptureLive, "capture on device %d", capturing)
		require.NoError(t, ps[capturing].EndCapture(graphs.Primary))
		assert.Equal(t, pattern(256, 2), readBack(t, ps[0], dst))
		require.NoError(t, ps[capturing].Replay(graphs.Primary))
		_, err = ps[capturing].ResetGraph(graphs.Primary)
		require.NoError(t, err)
	}
}

// TestProvidersOnTwoDevicesAreIsolated: each provider has its own context, streams, capture
// gate and counters; a capture on device 0 does not hold back a device drain, allocations,
// host copies or replays on device 1, and its own capture survives them.
func TestProvidersOnTwoDevicesAreIsolated(t *testing.T) {
	ps := newProviders(t, 2, nil, sim.Options{})
	p0, p1 := ps[0], ps[1]
	require.NotEqual(t, ep.ContextOf(p0).Raw(), ep.ContextOf(p1).Raw())
	assert.NotSame(t, ep.GateOf(p0), ep.GateOf(p1), "one capture gate per device")
	assert.NotEqual(t, p0.StreamHandle(), p1.StreamHandle())

	before0 := p0.Stats()
	xs := drivertest.RandomFloat32(64)
	x1 := upload(t, p1, xs)
	y1 := alloc(t, p1, x1.Size())
	assert.Equal(t, before0, p0.Stats(), "device 1's allocations are not device 0's")
	captureRelu(t, p1, graphs.Primary, x1, y1)
	require.NoError(t, p1.EndCapture(graphs.Primary))

	x0 := upload(t, p0, xs)
	y0 := alloc(t, p0, x0.Size())
	captureRelu(t, p0, graphs.Primary, x0, y0) // live on this thread from here

	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		assert.NoError(t, p1.ForceSynchronize(), "a drain of device 1 does not wait for device 0's capture")
		b, err := p1.Alloc(4096, 0)
		if assert.NoError(t, err) {
			assert.NoError(t, p1.CopyToDevice(b, 0, pattern(4096, 9)))
			got := make([]byte, 4096)
			assert.NoError(t, p1.CopyToHost(got, b, 0))
			assert.Equal(t, pattern(4096, 9), got)
			assert.NoError(t, b.Release())
		}
		assert.NoError(t, p1.Replay(graphs.Primary))
		assert.NoError(t, p1.SynchronizeCompute())
		assert.Zero(t, ep.GateOf(p1).WaitingDrains())
		_, err = p0.Alloc(64, 0)
		assert.ErrorIs(t, err, ep.ErrCaptureLive, "device 0's own calls are refused, not blocked")
	}()
	<-done
	require.NoError(t, p0.EndCapture(graphs.Primary), "device 1's work did not invalidate device 0's capture")
	require.NoError(t, p0.Replay(graphs.Primary))
	assert.Equal(t, reluOf(xs), download(t, p0, y0))
	assert.Equal(t, reluOf(xs), download(t, p1, y1))
}

// TestCaptureOnOneDeviceWhileTheOtherReplaysAndPages: one goroutine captures, replays and
// resets graphs on device 0 over and over while another replays a graph, pages weights and
// copies on device 1, each on its own OS thread; both see their own results every round.
func TestCaptureOnOneDeviceWhileTheOtherReplaysAndPages(t *testing.T) {
	ps := newProviders(t, 2, nil, sim.Options{}, func(o *ep.Options) { o.PrefillDoubleBuffer = true })
	p0, p1 := ps[0], ps[1]
	xs := drivertest.RandomFloat32(64)
	x0, y0 := upload(t, p0, xs), alloc(t, p0, 4*64)
	relu0 := getKernel(t, p0, "Relu", 14, f32(64))
	x1, y1 := upload(t, p1, xs), alloc(t, p1, 4*64)
	captureRelu(t, p1, graphs.Primary, x1, y1)
	require.NoError(t, p1.EndCapture(graphs.Primary))
	const layers, count = 4, 2048
	path, weights := writeLayers(t, layers, count)
	file, err := p1.OpenExternalData(path)
	require.NoError(t, err)
	lazy := lazyLayers(t, p1, file, layers, count)
	id1 := getKernel(t, p1, "Identity", 13, f32(count))
	paged := alloc(t, p1, 4*count)

	const rounds = 8
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // device 0: capture, replay, reset
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for r := 0; r < rounds; r++ {
			if !assert.NoError(t, p0.Memset(y0, 0, y0.Size(), 0xff)) {
				return
			}
			if !assert.NoError(t, p0.BeginCapture(graphs.Primary, []*ep.Kernel{relu0}, []*ep.Buffer{x0, y0})) {
				return
			}
			assert.NoError(t, relu0.Execute([]ep.Tensor{tensor(x0, 64)}, []ep.Tensor{tensor(y0, 64)}))
			if !assert.NoError(t, p0.EndCapture(graphs.Primary), "round %d", r) {
				return
			}
			assert.NoError(t, p0.Replay(graphs.Primary))
			out := make([]byte, y0.Size())
			assert.NoError(t, p0.CopyToHost(out, y0, 0))
			assert.Equal(t, reluOf(xs), drivertest.BytesFloat32(out), "device 0 round %d", r)
			_, err := p0.ResetGraph(graphs.Primary)
			assert.NoError(t, err)
		}
	}()
	go func() { // device 1: replay, page, copy
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for r := 0; r < rounds; r++ {
			assert.NoError(t, p1.Memset(y1, 0, y1.Size(), 0xff))
			assert.NoError(t, p1.Replay(graphs.Primary))
			out := make([]byte, y1.Size())
			assert.NoError(t, p1.CopyToHost(out, y1, 0))
			assert.Equal(t, reluOf(xs), drivertest.BytesFloat32(out), "device 1 round %d", r)
			i := r % layers
			if d, err := p1.PrefetchWeight(ep.LayerID(r), lazy[i]); !assert.NoError(t, err) || !assert.Equal(t, ep.DeclineNone, d.Reason) {
				return
			}
			pw, err := p1.PageWeight(ep.LayerID(r))
			if !assert.NoError(t, err) {
				return
			}
			in := ep.Tensor{TensorInfo: f32(count), Ptr: pw.Ptr()}
			assert.NoError(t, id1.Execute([]ep.Tensor{in}, []ep.Tensor{tensor(paged, count)}))
			got := make([]byte, paged.Size())
			assert.NoError(t, p1.CopyToHost(got, paged, 0))
			assert.Equal(t, weights[i], drivertest.BytesFloat32(got), "device 1 layer %d", i)
			assert.NoError(t, pw.Release())
		}
	}()
	wg.Wait()
	st, active := p1.ResidencyStats()
	require.True(t, active)
	assert.Equal(t, uint64(rounds), st.Consumed)
}

// TestClosingOneProviderWhileTheOtherWorks: device 1 replays and copies in a loop while device
// 0's provider copies into it and then closes; device 1 never notices, and a peer copy from
// the closed provider's buffer is refused afterwards.
func TestClosingOneProviderWhileTheOtherWorks(t *testing.T) {
	ps := newProviders(t, 2, nil, sim.Options{})
	p0, p1 := ps[0], ps[1]
	xs := drivertest.RandomFloat32(64)
	x1, y1 := upload(t, p1, xs), alloc(t, p1, 4*64)
	captureRelu(t, p1, graphs.Primary, x1, y1)
	require.NoError(t, p1.EndCapture(graphs.Primary))
	src0 := filled(t, p0, 1<<16, 6)
	dst1 := alloc(t, p1, 1<<16)

	stop := make(chan struct{})
	var rounds int
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for {
			select {
			case <-stop:
				return
			default:
			}
			assert.NoError(t, p1.Memset(y1, 0, y1.Size(), 0))
			assert.NoError(t, p1.Replay(graphs.Primary))
			out := make([]byte, y1.Size())
			assert.NoError(t, p1.CopyToHost(out, y1, 0))
			assert.Equal(t, reluOf(xs), drivertest.BytesFloat32(out))
			rounds++
		}
	}()
	path, err := p1.CopyPeer(dst1, 0, src0, 0, 1<<16)
	require.NoError(t, err)
	assert.NotEqual(t, ep.PeerPathNone, path)
	require.NoError(t, p0.Close())
	_, err = p1.CopyPeer(dst1, 0, src0, 0, 1<<16)
	assert.ErrorIs(t, err, ep.ErrClosed, "the source's provider is closed")
	_, err = p0.CopyPeer(dst1, 0, src0, 0, 1<<16)
	assert.ErrorIs(t, err, ep.ErrClosed)
	close(stop)
	<-worker
	assert.Positive(t, rounds)
	assert.Equal(t, pattern(1<<16, 6), readBack(t, p1, dst1), "the copy queued before the close landed")
	require.NoError(t, p1.ForceSynchronize())
	assert.NoError(t, ep.ContextOf(p1).StickyError())
}

// TestCopyPeerOrdersTheOwnerOfABufferOnOneDevice: with both buffers on one device, p copies
// its buffer into one q owns; q's read right after must see the copy. Copies are slow on the
// simulated device (CopyBandwidth), so a read that does not wait for p's stream sees the old
// bytes; this is the reverse copy that raced under load in TestCopyPeerForcedPathsOnOneDevice.
func TestCopyPeerOrdersTheOwnerOfABufferOnOneDevice(t *testing.T) {
	if drivertest.BackendName() == "sim" {
		ep.UseSimOptions(t, sim.Options{CopyBandwidth: 100 << 20})
	}
	p, q := newProvider(t), newProvider(t)
	const n = 1<<20 + 333
	ep.SetPeerChunk(p, 128<<10)
	for _, path := range []ep.PeerPath{ep.PeerPathNone, ep.PeerPathStaged, ep.PeerPathDirect} {
		t.Run(path.String(), func(t *testing.T) {
			ep.ForcePeerPath(p, path)
			defer ep.ForcePeerPath(p, ep.PeerPathNone)
			seed := byte(path)*5 + 1
			src := filled(t, p, n, seed)
			dst := filled(t, q, n, seed+1)
			_, err := p.CopyPeer(dst, 0, src, 0, n)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(pattern(n, seed), readBack(t, q, dst)), "q read its buffer before p's copy into it was done")
		})
	}
}
