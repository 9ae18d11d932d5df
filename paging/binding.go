package paging

import (
	"runtime"

	"github.com/cudaep/cudaep/cudadrv"
)

// binding is a context made current on the calling goroutine's OS thread for the length of one
// call into this package.
type binding struct {
	ctx  *cudadrv.Context
	prev cudadrv.RawContext
}

// bind locks the calling goroutine to its OS thread and makes ctx current there, remembering
// the context that was current before. CUDA contexts are current per OS thread, and the
// caller may be any goroutine (a C thread, a worker, a test's subtest), so every entry point
// that calls the driver binds first. LockOSThread nests, so a caller that already locked its
// thread stays locked after done.
func bind(ctx *cudadrv.Context) (binding, error) {
	runtime.LockOSThread()
	cur, err := ctx.Backend().CtxGetCurrent()
	if err != nil {
		runtime.UnlockOSThread()
		return binding{}, err
	}
	if cur != ctx.Raw() {
		if err := ctx.Bind(); err != nil {
			runtime.UnlockOSThread()
			return binding{}, err
		}
	}
	return binding{ctx: ctx, prev: cur}, nil
}

// done restores the thread's previous context (when it had another one) and unlocks.
func (b binding) done() {
	if b.prev != 0 && b.prev != b.ctx.Raw() {
		_ = b.ctx.Backend().CtxSetCurrent(b.prev)
	}
	runtime.UnlockOSThread()
}
