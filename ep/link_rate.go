package ep

import (
	"errors"
	"fmt"
	"time"

	"github.com/cudaep/cudaep/cudadrv"
)

// MeasureHostToDevice measures the host link that prefill paging streams weights over: copies
// back-to-back copies of size bytes from pinned host memory into one device buffer, on a
// non-blocking stream of their own, timed from the first enqueue until that stream has run the
// last copy. It returns the best of runs such runs, in bytes per second.
//
// It is the raw baseline a host compares the paging rate with (a prefill slower than this
// waited for its kernels, not for the link): nothing of the residency, the double buffer or
// the provider's streams is involved. The host memory holds distinct non-zero bytes.
//
// # Notes
//
// It allocates size bytes of pinned host memory (slow: milliseconds per MiB) and size bytes of
// device memory, and frees both, and the stream, before it returns. It holds the provider's
// capture window for the whole measurement, so a BeginCapture or Close on another thread
// waits for it. Safe to call from any goroutine.
//
// # Errors
//
// A zero size, copies or runs is an argument error (ErrInvalidArgument); during a capture on
// the provider it is refused with ErrCaptureLive; a closed provider; the driver's errors
// (CUDA_ERROR_OUT_OF_MEMORY when the host cannot pin size bytes or the device has no room).
func (p *Provider) MeasureHostToDevice(size uint64, copies, runs int) (bytesPerSecond float64, err error) {
	if size == 0 || copies < 1 || runs < 1 {
		return 0, fmt.Errorf("%w: measure host to device: size %d, copies %d and runs %d must be positive",
			ErrInvalidArgument, size, copies, runs)
	}
	e, err := p.enter("measure the host-to-device link", accessDriver)
	if err != nil {
		return 0, err
	}
	defer e.leave()
	defer func() {
		if err != nil {
			err = fmt.Errorf("ep: measure host to device: %w", err)
		}
	}()
	host, err := p.ctx.AllocHost(size)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, host.Free()) }()
	for i := range host.Bytes() {
		host.Bytes()[i] = byte(i%251) + 1
	}
	dev, err := p.ctx.Alloc(size)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, dev.Free()) }()
	s, err := p.ctx.NewStream(cudadrv.StreamNonBlocking, 0)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, s.Destroy()) }()
	for range runs {
		start := time.Now()
		for range copies {
			if err := s.CopyHtoDAsync(dev.Ptr(), host.Bytes()); err != nil {
				return 0, err
			}
		}
		if err := s.Synchronize(); err != nil {
			return 0, err
		}
		bytesPerSecond = max(bytesPerSecond, float64(size)*float64(copies)/time.Since(start).Seconds())
	}
	return bytesPerSecond, nil
}
