package cuda

import "github.com/cudaep/cudaep/cudadrv"

// DeviceCanAccessPeer reports whether device ordinal can access the memory of device peer
// directly (cuDeviceCanAccessPeer). The driver answers false for a device and itself.
func (b *Backend) DeviceCanAccessPeer(ordinal, peer int) (bool, error) {
	dev, err := b.device(ordinal)
	if err != nil {
		return false, err
	}
	pdev, err := b.device(peer)
	if err != nil {
		return false, err
	}
	// can escapes through the wrapper: one allocation on this cold call.
	var can int32
	if err := cudadrv.NewError("cuDeviceCanAccessPeer", b.drv.cuDeviceCanAccessPeer(&can, dev, pdev)); err != nil {
		return false, err
	}
	return can != 0, nil
}

// CtxEnablePeerAccess lets the current context access the memory of peer
// (cuCtxEnablePeerAccess, flags 0). A pair already enabled returns
// CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, as the driver does.
func (b *Backend) CtxEnablePeerAccess(peer cudadrv.RawContext) error {
	return cudadrv.NewError("cuCtxEnablePeerAccess", b.drv.cuCtxEnablePeerAccess(peer, 0))
}

// MemcpyPeerAsync queues on s a copy of size bytes from src in srcCtx to dst in dstCtx
// (cuMemcpyPeerAsync). It is a hot call: it allocates nothing.
func (b *Backend) MemcpyPeerAsync(dst cudadrv.DevicePtr, dstCtx cudadrv.RawContext, src cudadrv.DevicePtr, srcCtx cudadrv.RawContext, size uint64, s cudadrv.RawStream) error {
	return cudadrv.NewError("cuMemcpyPeerAsync", b.drv.cuMemcpyPeerAsync(dst, dstCtx, src, srcCtx, uintptr(size), s))
}
