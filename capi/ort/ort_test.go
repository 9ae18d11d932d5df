package ort

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
	engine "github.com/cudaep/cudaep/partition"
)

func TestParseOptionsTakesTheEPsKeysAndNamesBadOnes(t *testing.T) {
	o, err := parseOptions(map[string]string{
		"ep.cudaep.backend": "sim", "ep.cudaep.device_id": "0", "ep.cudaep.enable_cuda_graph": "1",
		"ep.cudaep.paging": "off", "ep.cudaep.weight_budget_bytes": "0", "ep.cudaep.tf32": "1",
		"session.disable_cpu_ep_fallback": "1", // not ours: ignored
	})
	require.NoError(t, err)
	assert.Equal(t, ep.BackendSim, o.provider.Backend)
	assert.True(t, o.cudaGraph)
	assert.True(t, o.provider.TF32)
	assert.Equal(t, "off", o.paging)
	assert.True(t, o.fusion, "fusion is on by default")
	o, err = parseOptions(map[string]string{"ep.cudaep.fusion": "off"})
	require.NoError(t, err)
	assert.False(t, o.fusion)

	for key, value := range map[string]string{
		"ep.cudaep.fusion":              "1",
		"ep.cudaep.no_such_key":         "1",
		"ep.cudaep.backend":             "opencl",
		"ep.cudaep.device_id":           "minus one",
		"ep.cudaep.enable_cuda_graph":   "maybe",
		"ep.cudaep.paging":              "sometimes",
		"ep.cudaep.weight_budget_bytes": "-5",
	} {
		_, err := parseOptions(map[string]string{key: value})
		require.Error(t, err, "%s=%s", key, value)
		assert.Contains(t, err.Error(), key, "the error names the key")
	}
	o, err = parseOptions(map[string]string{"ep.cudaep.paging": "on", "ep.cudaep.weight_budget_bytes": "4096"})
	require.NoError(t, err)
	assert.Equal(t, "on", o.paging)
	assert.Equal(t, uint64(4096), o.weightBytes)
}

// TestPagingDecisionFollowsModeAndBudget: on always pages external data, auto pages what is over
// the budget, off refuses a partition over the budget, naming both options.
func TestPagingDecisionFollowsModeAndBudget(t *testing.T) {
	for _, c := range []struct {
		mode           string
		budget, weight uint64
		pages          bool
		fails          bool
	}{
		{"on", 0, 100, true, false},
		{"on", 0, 0, false, false}, // nothing external: nothing to page
		{"auto", 0, 1 << 40, false, false},
		{"auto", 1000, 1000, false, false},
		{"auto", 1000, 1001, true, false},
		{"off", 0, 1 << 40, false, false},
		{"off", 1000, 1001, false, true},
	} {
		s := &session{opts: sessionOptions{paging: c.mode, weightBytes: c.budget}}
		pages, err := s.pages(c.weight)
		if c.fails {
			require.Error(t, err, "%+v", c)
			assert.ErrorContains(t, err, "weight_budget_bytes=1000")
			assert.ErrorContains(t, err, "paging=off")
			continue
		}
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c.pages, pages, "%+v", c)
	}
}

// TestCheckExternalRefusesWhatORTRefuses: a hostile model gets a clear error, never another
// file's bytes.
func TestCheckExternalRefusesWhatORTRefuses(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	model := filepath.Join(dir, "model.onnx")
	require.NoError(t, os.WriteFile(model, []byte("m"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w.bin"), []byte("0123456789"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.bin"), []byte("secret"), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.bin"), filepath.Join(dir, "link.bin")))

	got, err := checkExternal(model, "w.bin", 2, 4)
	require.NoError(t, err)
	want, err := filepath.EvalSymlinks(filepath.Join(dir, "w.bin"))
	require.NoError(t, err)
	assert.Equal(t, want, got)

	for name, c := range map[string]struct {
		loc  string
		off  int64
		n    uint64
		want string
	}{
		"absolute":       {filepath.Join(outside, "secret.bin"), 0, 6, "absolute"},
		"parent":         {"../" + filepath.Base(outside) + "/secret.bin", 0, 6, "outside the model's directory"},
		"symlink out":    {"link.bin", 0, 6, "outside the model's directory"},
		"past the end":   {"w.bin", 8, 4, "pass the end"},
		"huge offset":    {"w.bin", 1 << 40, 1, "pass the end"},
		"negative":       {"w.bin", -1, 1, "pass the end"},
		"missing file":   {"nope.bin", 0, 1, "nope.bin"},
		"empty location": {"", 0, 1, "absolute"},
	} {
		_, err := checkExternal(model, c.loc, c.off, c.n)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
	}
	_, err = checkExternal("", "w.bin", 0, 1)
	assert.ErrorContains(t, err, "loaded from bytes")
}

// TestLookupFindsTheAllocationHoldingAnAddress: ORT may hand back addresses inside an
// allocation (several tensors in one); anything outside CudaEp's allocations is refused.
func TestLookupFindsTheAllocationHoldingAnAddress(t *testing.T) {
	devmem.mu.Lock()
	saved := devmem.bufs
	devmem.bufs = []devBuf{{base: 0x1000, size: 0x100, ordinal: 0}, {base: 0x2000, size: 0x40, ordinal: 1}}
	devmem.mu.Unlock()
	t.Cleanup(func() {
		devmem.mu.Lock()
		devmem.bufs = saved
		devmem.mu.Unlock()
	})
	b, off, err := lookup(0x1010, 0x20)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x1000), b.base)
	assert.Equal(t, uint64(0x10), off)
	b, off, err = lookup(0x2000, 0x40)
	require.NoError(t, err)
	assert.Equal(t, 1, b.ordinal)
	assert.Zero(t, off)
	for _, c := range []struct{ addr, n uint64 }{{0xfff, 1}, {0x10f0, 0x20}, {0x1100, 1}, {0x2040, 1}, {0x1800, 4}} {
		_, _, err := lookup(c.addr, c.n)
		assert.ErrorIs(t, err, errInvalid, "%#x+%d", c.addr, c.n)
	}
}

// TestFreedAllocationsAreReusedBySize: ORT allocates a run's tensors anew every run; a freed
// allocation of the same size on the same device is handed out again instead of a new one.
func TestFreedAllocationsAreReusedBySize(t *testing.T) {
	devmem.mu.Lock()
	saved := devmem.cached
	devmem.cached = engine.FreeList[devBuf]{}
	require.True(t, devmem.cached.Keep(engine.SizeKey{Ordinal: 0, Size: 4096}, devBuf{base: 0x9000, size: 4096}))
	devmem.mu.Unlock()
	t.Cleanup(func() {
		devmem.mu.Lock()
		devmem.cached = saved
		devmem.mu.Unlock()
	})
	_, ok := reuse(1, 4096)
	assert.False(t, ok, "another device's allocation is not reused")
	_, ok = reuse(0, 4095)
	assert.False(t, ok, "another size is not reused")
	d, ok := reuse(0, 4096)
	require.True(t, ok)
	assert.Equal(t, uint64(0x9000), d.base)
	assert.Zero(t, devmem.cached.Bytes())
	_, ok = reuse(0, 4096)
	assert.False(t, ok, "an allocation is handed out once")
}

// TestKernelOpNamesContribOpsByDomain: ONNX-domain ops keep their type and the graph's opset,
// com.microsoft ops reach the kernels prefixed with their domain, other domains are not claimed.
// TestConstOfReadsSixteenBitFloats: a float16 or bfloat16 constant (an exported attention's
// scale, say) reaches the kernels and the fusion as its values.
func TestConstOfReadsSixteenBitFloats(t *testing.T) {
	for _, tc := range []struct {
		dt   ep.DType
		bits []uint16
		want []float64
	}{
		{ep.Float16, []uint16{0x3c00, 0xb800, 0x3400}, []float64{1, -0.5, 0.25}},
		{ep.BFloat16, []uint16{0x3f80, 0xbf00, 0x3e00}, []float64{1, -0.5, 0.125}},
	} {
		c, ok := constOf(ep.TensorInfo{DType: tc.dt, Shape: []int64{3}}, unsafe.Pointer(&tc.bits[0]), 6)
		require.True(t, ok, "%s", tc.dt)
		assert.Equal(t, tc.want, c.Floats, "%s", tc.dt)
		assert.Nil(t, c.Ints)
		_, ok = constOf(ep.TensorInfo{DType: tc.dt, Shape: []int64{3}}, unsafe.Pointer(&tc.bits[0]), 4)
		assert.False(t, ok, "%s: a byte count that disagrees with the shape", tc.dt)
	}
}

func TestKernelOpNamesContribOpsByDomain(t *testing.T) {
	op, ok := kernelOp(&node{op: "Relu"}, 17)
	assert.True(t, ok)
	assert.Equal(t, opName{"Relu", 17}, op)
	op, ok = kernelOp(&node{op: "Relu", domain: "ai.onnx"}, 14)
	assert.True(t, ok)
	assert.Equal(t, opName{"Relu", 14}, op)
	op, ok = kernelOp(&node{op: "SkipLayerNormalization", domain: "com.microsoft"}, 17)
	assert.True(t, ok)
	assert.Equal(t, opName{"com.microsoft.SkipLayerNormalization", 1}, op)
	_, ok = kernelOp(&node{op: "Foo", domain: "org.example"}, 17)
	assert.False(t, ok)
}

func TestOpCountsListsOperatorsInFirstAppearanceOrder(t *testing.T) {
	nodes := []engine.Node{{Op: "MatMul"}, {Op: "cudaep.WherePair"}, {Op: "MatMul"}, {Op: "Attention"}, {Op: "cudaep.WherePair"}, {Op: "MatMul"}}
	assert.Equal(t, "MatMul x3, cudaep.WherePair x2, Attention x1", opCounts(nodes))
	assert.Empty(t, opCounts(nil))
}

// FuzzParseOptions sets arbitrary values on every session option key, one key at a time and all
// at once (session options come from hosts as strings): parseOptions accepts a value or refuses
// it with an error wrapping errInvalid that names the key; it never panics. An unknown key is
// always refused.
func FuzzParseOptions(f *testing.F) {
	for _, v := range []string{"", "0", "1", "on", "off", "auto", "sim", "cuda", "-1", "4096", "true", " 1", "18446744073709551616"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		all := map[string]string{}
		for _, key := range append(slices.Clone(optionKeys), "no_such_key") {
			full := optionPrefix + key
			all[full] = value
			_, err := parseOptions(map[string]string{full: value})
			if key == "no_such_key" {
				require.Error(t, err)
			}
			if err != nil {
				require.ErrorIs(t, err, errInvalid, "%s=%q", full, value)
				require.Contains(t, err.Error(), full, "%s=%q: the error names the key", full, value)
			}
		}
		_, err := parseOptions(all)
		require.ErrorIs(t, err, errInvalid, "the unknown key is refused among the others")
		require.Contains(t, err.Error(), optionPrefix)
	})
}

// TestExternalLengthTakesAMissingLengthAsTheTensorsSize: ONNX's length field is optional (then
// the tensor's size from offset), and ORT reports a missing one as 0.
func TestExternalLengthTakesAMissingLengthAsTheTensorsSize(t *testing.T) {
	n, err := externalLength(0, 48)
	require.NoError(t, err)
	assert.Equal(t, uint64(48), n, "no length: the tensor's 48 bytes")
	n, err = externalLength(48, 48)
	require.NoError(t, err)
	assert.Equal(t, uint64(48), n)
	n, err = externalLength(0, 0)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = externalLength(40, 48)
	assert.ErrorContains(t, err, "its length is 40 bytes, the tensor needs 48")
}

// TestJudgeDeclinesAPanickingNodeAlone: a panic while judging one node declines that node and
// is reported as a crash (logged at WARNING), and the next node is judged as usual.
func TestJudgeDeclinesAPanickingNodeAlone(t *testing.T) {
	calls := 0
	supports := func(nd *node, opset int64) error {
		calls++
		if nd.op == "Slice" {
			panic("integer divide by zero")
		}
		return nil
	}
	why, crashed := judge(&node{op: "Slice", name: "s"}, 17, supports)
	require.Error(t, why)
	assert.True(t, crashed)
	assert.Contains(t, why.Error(), "integer divide by zero")
	why, crashed = judge(&node{op: "Add", name: "a"}, 17, supports)
	assert.NoError(t, why)
	assert.False(t, crashed)
	assert.Equal(t, 2, calls)
}
