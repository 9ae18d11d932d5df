package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cudaep/cudaep/cudadrv"
)

// opKind says what a queued operation or graph node does.
type opKind uint8

const (
	opKernel   opKind = iota + 1 // run a registered kernel
	opHtoD                       // copy host → device
	opDtoH                       // copy device → host
	opDtoD                       // copy device → device
	opMemset8                    // fill bytes
	opMemset32                   // fill 32-bit words
	opRecord                     // complete an event record (stream queues only)
	opWait                       // wait for another stream's position (stream queues only)
	opGraph                      // replay graph nodes (a launch, or a child-graph node)
	opGemm                       // cuBLAS SGEMM / strided-batched SGEMM
	opWrite32                    // cuStreamWriteValue32: one atomic 32-bit store
)

// String names the kind for update-failure details.
func (k opKind) String() string {
	switch k {
	case opKernel:
		return "kernel"
	case opHtoD:
		return "memcpy HtoD"
	case opDtoH:
		return "memcpy DtoH"
	case opDtoD:
		return "memcpy DtoD"
	case opMemset8:
		return "memset D8"
	case opMemset32:
		return "memset D32"
	case opRecord:
		return "event record"
	case opWait:
		return "event wait"
	case opGraph:
		return "child graph"
	case opGemm:
		return "cuBLAS GEMM"
	case opWrite32:
		return "write value 32"
	}
	return "unknown"
}

// op is one unit of stream work and, for the executable kinds, one graph node. It is a plain
// value so that queueing it allocates nothing.
type op struct {
	kind opKind

	// opKernel
	fn          *function
	grid, block cudadrv.Dim3
	shared      uint32
	nargs       int
	args        [cudadrv.MaxKernelArgs]uint64

	// copies, memsets and writes: device addresses, byte count (element count for
	// opMemset32), the host slice of a host copy, the fill or written value.
	dst, src cudadrv.DevicePtr
	size     uint64
	host     []byte
	value    uint32

	// opRecord: the event; opWait: the stream and position waited for.
	event  *event
	target *stream
	pos    uint64

	// opGraph: the nodes to replay, in a valid topological order.
	nodes []op

	// opGemm
	gemm    cudadrv.GemmParams
	batched bool
	math    cudadrv.MathMode
}

// ring is a growable FIFO of ops; pushing allocates only when it grows.
type ring struct {
	buf  []op
	head int
	n    int
}

func (r *ring) push(o *op) {
	if r.n == len(r.buf) {
		nb := make([]op, max(16, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = *o
	r.n++
}

func (r *ring) pop(dst *op) {
	*dst = r.buf[r.head]
	r.buf[r.head] = op{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

// enqueue appends o to s, first adding the legacy stream's implicit synchronization: the
// legacy stream waits for all earlier work of the context's blocking streams, and a blocking
// stream waits for all earlier legacy work. It returns o's position. d.mu is held.
func (d *Device) enqueue(s *stream, o *op) uint64 {
	if s.legacy {
		for b := range s.ctx.streams {
			if b.blocking() && b.done < b.enq {
				d.push(s, &op{kind: opWait, target: b, pos: b.enq})
			}
		}
	} else if s.blocking() {
		l := s.ctx.legacy
		if l.done < l.enq && s.waitedLegacy < l.enq {
			d.push(s, &op{kind: opWait, target: l, pos: l.enq})
			s.waitedLegacy = l.enq
		}
	}
	return d.push(s, o)
}

// push queues o on s and wakes its worker, returning o's position. d.mu is held.
func (d *Device) push(s *stream, o *op) uint64 {
	s.q.push(o)
	s.enq++
	s.wake.Signal()
	return s.enq
}

// work is s's worker: it runs queued operations in order until the stream stops or the
// device closes. Operations in a faulted context are skipped (but still complete), as the
// hardware stops executing after a sticky error.
func (d *Device) work(s *stream) {
	defer d.workers.Done()
	var cur op
	d.mu.Lock()
	for {
		for s.q.n == 0 && !s.stopping && !d.closed {
			s.wake.Wait()
		}
		if d.closed || s.q.n == 0 {
			break
		}
		s.q.pop(&cur)
		pos := s.done + 1
		switch cur.kind {
		case opRecord:
			if e := cur.event; e.recStream == s && e.recPos == pos {
				e.at = time.Now()
			}
		case opWait:
			for cur.target.done < cur.pos && !d.closed {
				d.cond.Wait()
			}
		default:
			if s.ctx.sticky == nil {
				d.mu.Unlock()
				r, detail := d.execute(s, &cur)
				d.mu.Lock()
				if r != cudadrv.Success {
					s.ctx.setSticky(r, detail)
				}
			}
		}
		s.done = pos
		cur = op{}
		d.cond.Broadcast()
	}
	s.exited = true
	d.cond.Broadcast()
	d.mu.Unlock()
}

// execute runs one executable op without d.mu held and returns the fault it caused, if any.
func (d *Device) execute(s *stream, o *op) (cudadrv.Result, string) {
	switch o.kind {
	case opKernel:
		return d.runKernel(s, o)
	case opGemm:
		return d.runGemm(o)
	case opGraph:
		for i := range o.nodes {
			if r, detail := d.execute(s, &o.nodes[i]); r != cudadrv.Success {
				return r, detail
			}
		}
		return cudadrv.Success, ""
	case opHtoD:
		d.modelCopy(uint64(len(o.host)))
		dst, err := d.view(o.dst, uint64(len(o.host)))
		if err != nil {
			return accessFault("memcpy HtoD", err)
		}
		copy(dst, o.host)
	case opDtoH:
		d.modelCopy(uint64(len(o.host)))
		src, err := d.view(o.src, uint64(len(o.host)))
		if err != nil {
			return accessFault("memcpy DtoH", err)
		}
		copy(o.host, src)
	case opDtoD:
		d.modelCopy(o.size)
		src, err := d.view(o.src, o.size)
		if err != nil {
			return accessFault("memcpy DtoD source", err)
		}
		dst, err := d.view(o.dst, o.size)
		if err != nil {
			return accessFault("memcpy DtoD destination", err)
		}
		copy(dst, src)
	case opMemset8:
		dst, err := d.view(o.dst, o.size)
		if err != nil {
			return accessFault("memset D8", err)
		}
		b := byte(o.value)
		for i := range dst {
			dst[i] = b
		}
	case opMemset32:
		dst, err := d.view(o.dst, 4*o.size)
		if err != nil {
			return accessFault("memset D32", err)
		}
		for i := 0; i+4 <= len(dst); i += 4 {
			binary.LittleEndian.PutUint32(dst[i:], o.value)
		}
	case opWrite32:
		dst, err := d.view(o.dst, 4)
		if err != nil {
			return accessFault("write value 32", err)
		}
		// Atomic, because a host may be spinning on the word: the store publishes every
		// earlier write of the stream (this worker's, and the workers' it waited for) to a
		// host that loads the value atomically. The address is 4-byte aligned, and so is the
		// Go memory behind it (allocations are word-backed).
		atomic.StoreUint32((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), o.value)
	}
	return cudadrv.Success, ""
}

// accessFault turns a failed access by what into the sticky fault it causes.
func accessFault(what string, err error) (cudadrv.Result, string) {
	return faultResult(err), what + ": " + err.Error()
}

// faultResult maps a kernel's or an access's error to the sticky CUresult it raises: an
// out-of-bounds access is CUDA_ERROR_ILLEGAL_ADDRESS, a misaligned one
// CUDA_ERROR_MISALIGNED_ADDRESS, an error carrying a sticky Result that Result, anything else
// CUDA_ERROR_LAUNCH_FAILED.
func faultResult(err error) cudadrv.Result {
	var ae *AccessError
	if errors.As(err, &ae) {
		if ae.Misaligned {
			return cudadrv.ErrorMisalignedAddress
		}
		return cudadrv.ErrorIllegalAddress
	}
	if r := cudadrv.ResultOf(err); r.Sticky() {
		return r
	}
	return cudadrv.ErrorLaunchFailed
}

// runKernel runs a kernel op on s's reusable Launch, turning a returned error or a panic into
// a fault.
func (d *Device) runKernel(s *stream, o *op) (r cudadrv.Result, detail string) {
	d.mu.Lock()
	unloaded := o.fn.module.unloaded
	d.mu.Unlock()
	if unloaded {
		return cudadrv.ErrorLaunchFailed, fmt.Sprintf("kernel %q: its module was unloaded before the launch ran", o.fn.name)
	}
	d.sleep(d.opts.KernelDuration)
	l := s.launch
	*l = cudadrv.NewKernelLaunch(d.kernelMemory(), o.fn.name, o.grid, o.block, o.shared, o.args[:o.nargs])
	defer func() {
		*l = Launch{} // drop the argument words and the memory until the next launch
		if p := recover(); p != nil {
			r, detail = cudadrv.ErrorLaunchFailed, fmt.Sprintf("kernel %q panicked: %v", o.fn.name, p)
		}
	}()
	if err := o.fn.fn(l); err != nil {
		return faultResult(err), fmt.Sprintf("kernel %q: %v", o.fn.name, err)
	}
	return cudadrv.Success, ""
}

// modelCopy spends the time a copy of n bytes takes under Options.CopyBandwidth.
func (d *Device) modelCopy(n uint64) {
	if bw := d.opts.CopyBandwidth; bw > 0 && n > 0 {
		d.sleep(time.Duration(float64(n) / bw * float64(time.Second)))
	}
}

// sleep spends modelled time t on the calling worker: time.Sleep, or the test's clock.
func (d *Device) sleep(t time.Duration) {
	if t <= 0 {
		return
	}
	if d.sleepHook != nil {
		d.sleepHook(t)
		return
	}
	time.Sleep(t)
}
