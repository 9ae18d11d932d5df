package graphs

import (
	"strconv"
	"sync/atomic"
)

// Owner identifies the executor that owns a lifecycle (one per session or provider). Tokens
// carry it so that an executor can never replay, end, abort or reset another's graph. The
// zero Owner is invalid.
type Owner uint64

// lastOwner is the most recently issued Owner.
var lastOwner atomic.Uint64

// NewOwner returns an Owner never returned before in this process. It is safe for concurrent
// use.
func NewOwner() Owner { return Owner(lastOwner.Add(1)) }

// String returns the owner's number.
func (o Owner) String() string { return strconv.FormatUint(uint64(o), 10) }

type slotKind uint8

const (
	slotPrimary slotKind = iota + 1
	slotVerify
	slotKeyed
)

// Slot names one lifecycle among those sharing a stream: [Primary], [Verify] or a keyed slot
// made with [Keyed]. Slots are comparable values; the zero Slot is invalid.
type Slot struct {
	kind slotKind
	key  int64
}

// The fixed slots. Treat them as constants.
var (
	// Primary is the slot of the M=1 decode step.
	Primary = Slot{kind: slotPrimary}
	// Verify is the slot of the fixed-width (speculative) verify step.
	Verify = Slot{kind: slotVerify}
)

// Keyed returns the slot of the graph captured for a shape key, such as the batch size a
// host captures a decode step for. Every int64 is a valid key; Keyed(k) is distinct from
// Primary and Verify for every k.
func Keyed(key int64) Slot { return Slot{kind: slotKeyed, key: key} }

// Key returns the key of a keyed slot, and false for Primary, Verify and the zero Slot.
func (s Slot) Key() (int64, bool) { return s.key, s.kind == slotKeyed }

// Valid reports whether s is Primary, Verify or a keyed slot.
func (s Slot) Valid() bool { return s.kind >= slotPrimary && s.kind <= slotKeyed }

// String returns "primary", "verify", "keyed(K)" or "invalid".
func (s Slot) String() string {
	switch s.kind {
	case slotPrimary:
		return "primary"
	case slotVerify:
		return "verify"
	case slotKeyed:
		return "keyed(" + strconv.FormatInt(s.key, 10) + ")"
	}
	return "invalid"
}

// Token names one installed generation of one slot of one owner. Tokens are comparable
// values, cheap to copy; the zero Token names nothing and, passed to [Lifecycle.Begin],
// asks for a new generation.
type Token struct {
	owner      Owner
	slot       Slot
	generation uint64
}

// NewToken assembles a token. Lifecycles hand out tokens themselves; NewToken exists for
// executors that persist the parts, and for tests that forge a foreign one. A forged token
// is harmless: every use is checked against the installation.
func NewToken(owner Owner, slot Slot, generation uint64) Token {
	return Token{owner: owner, slot: slot, generation: generation}
}

// Owner returns the owner the token belongs to.
func (t Token) Owner() Owner { return t.owner }

// Slot returns the slot the token names.
func (t Token) Slot() Slot { return t.slot }

// Generation returns the installation generation, counted from 1 per lifecycle. A keyed
// lifecycle that a [Slots] makes for a key used before (and removed) counts on from past the
// generations of the lifecycles it removed, so that their tokens never name its own.
func (t Token) Generation() uint64 { return t.generation }

// IsZero reports whether t is the zero Token.
func (t Token) IsZero() bool { return t == Token{} }

// String formats t as "owner=O slot=S generation=G", or "none" for the zero Token.
func (t Token) String() string {
	if t.IsZero() {
		return "none"
	}
	return "owner=" + t.owner.String() + " slot=" + t.slot.String() +
		" generation=" + strconv.FormatUint(t.generation, 10)
}
