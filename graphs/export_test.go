package graphs

// LifecycleHooks stop a lifecycle at exact points, for tests that order a replay against a
// reset without timing.
type LifecycleHooks struct {
	BeforeLaunch func() // a replay was admitted and is about to launch a segment
	AfterLaunch  func() // a replay launched a segment
	ResetWaits   func() // a retirement found admitted replays and is about to wait for them
}

// SetLifecycleHooks installs h on l. Call it before l is used concurrently.
func SetLifecycleHooks(l *Lifecycle, h LifecycleHooks) {
	l.hooks = &testHooks{beforeLaunch: h.BeforeLaunch, afterLaunch: h.AfterLaunch, resetWaits: h.ResetWaits}
}

// SetDrainWaitHook makes g call f each time a drain is about to wait behind live captures.
func SetDrainWaitHook(g *Gate, f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onDrainWait = f
}
