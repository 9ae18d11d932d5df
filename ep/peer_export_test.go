package ep

// ForcePeerPath makes the peer copies with p as the destination side take path whatever the
// devices allow (PeerPathNone: the devices decide again), so that a machine with one GPU runs
// the staged and direct machinery between two providers of that GPU.
func ForcePeerPath(p *Provider, path PeerPath) { p.peer.force.Store(uint32(path)) }

// SetPeerChunk sets the size of p's two staging slots; call it before p's first staged copy.
func SetPeerChunk(p *Provider, n uint64) {
	p.peer.staging.Lock()
	defer p.peer.staging.Unlock()
	p.peer.chunk = n
}
