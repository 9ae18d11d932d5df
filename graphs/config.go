package graphs

// DefaultMaxKeyedSlots is the number of keyed lifecycles a [Slots] holds at most unless
// configured otherwise: enough for every capture size a serving engine keeps (vLLM's default
// list has 67 sizes up to 512).
const DefaultMaxKeyedSlots = 128

// Config configures a [Lifecycle] or [Slots]. It is an immutable value: each With method
// returns a changed copy. The zero Config is the default.
type Config struct {
	gate     *Gate
	maxKeyed int
}

// WithGate returns a copy of c that makes lifecycles hold g instead of the gate of their
// stream's device ([GateFor]). Use it to share a gate with drains that cannot reach a
// cudadrv.Context, or to isolate a lifecycle in tests.
func (c Config) WithGate(g *Gate) Config {
	c.gate = g
	return c
}

// WithMaxKeyedSlots returns a copy of c that lets a [Slots] hold at most n keyed lifecycles
// (n <= 0 restores [DefaultMaxKeyedSlots]).
func (c Config) WithMaxKeyedSlots(n int) Config {
	c.maxKeyed = n
	return c
}

// MaxKeyedSlots returns the configured bound on keyed lifecycles.
func (c Config) MaxKeyedSlots() int {
	if c.maxKeyed <= 0 {
		return DefaultMaxKeyedSlots
	}
	return c.maxKeyed
}
