package graphs

// LifecycleHooks stop a lifecycle at exact points, for tests that order a replay against a
// reset without timing.
type LifecycleHooks struct {
	BeforeEnter  func() // a replay found its generation installed and is about to enter the epoch
	Admitted     func() // a replay was admitted and loaded the set it will launch
	BeforeLaunch func() // a replay was admitted and is about to launch a segment
	AfterLaunch  func() // a replay launched a segment
	ResetWaits   func() // a retirement found admitted replays and is about to wait for them
}

// SetLifecycleHooks installs h on l. Call it before l is used concurrently.
func SetLifecycleHooks(l *Lifecycle, h LifecycleHooks) {
	l.hooks = &testHooks{
		beforeEnter:  h.BeforeEnter,
		admitted:     h.Admitted,
		beforeLaunch: h.BeforeLaunch,
		afterLaunch:  h.AfterLaunch,
		resetWaits:   h.ResetWaits,
	}
}

// ForgePublishedSet publishes, in place of l's replay set, a set with no segment that names
// the installed generation's successor, as if the set had changed under a replay; restore
// puts the real one back (if the forgery is still published). A replay that loads the set
// only inside its admission (between the BeforeEnter and Admitted hooks) and launches what it
// loaded is unaffected by a forgery published only outside that window; one that loads the
// set anywhere else fails or launches nothing.
func ForgePublishedSet(l *Lifecycle) (restore func()) {
	published := l.replay.Load()
	forged := &replaySet{}
	if published != nil {
		forged.token = l.tokenOf(published.token.generation + 1)
	}
	l.replay.Store(forged)
	return func() { l.replay.CompareAndSwap(forged, published) }
}

// SetDrainWaitHook makes g call f each time a drain is about to wait behind live captures.
func SetDrainWaitHook(g *Gate, f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onDrainWait = f
}
