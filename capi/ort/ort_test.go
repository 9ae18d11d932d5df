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
	"github.com/cudaep/cudaep/partition"
)

func TestParseOptionsTakesTheEPsKeysAndNamesBadOnes(t *testing.T) {
	o, err := parseOptions(map[string]string{
		"ep.cudaep.backend": "sim", "ep.cudaep.device_id": "0", "ep.cudaep.enable_cuda_graph": "1",
		"ep.cudaep.paging": "off", "ep.cudaep.weight_budget_bytes": "0", "ep.cudaep.tf32": "1",
		"session.disable_cpu_ep_fallback": "1", // not ours: ignored
	})
	require.NoError(t, err)
	assert.Equal(t, ep.BackendSim, o.provider.Backend)
	assert.True(t, o.partition.CUDAGraph)
	assert.True(t, o.provider.TF32)
	assert.Equal(t, partition.PagingOff, o.partition.Paging)
	assert.True(t, o.partition.Fusion, "fusion is on by default")
	o, err = parseOptions(map[string]string{"ep.cudaep.fusion": "off"})
	require.NoError(t, err)
	assert.False(t, o.partition.Fusion)

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
	assert.Equal(t, partition.PagingOn, o.partition.Paging)
	assert.Equal(t, uint64(4096), o.partition.WeightBudget)
	assert.Equal(t, optionPrefix, o.partition.KeyPrefix, "the partition's errors name ORT's keys")
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
	op, ok := kernelOp("Relu", "", 17)
	assert.True(t, ok)
	assert.Equal(t, opName{"Relu", 17}, op)
	op, ok = kernelOp("Relu", "ai.onnx", 14)
	assert.True(t, ok)
	assert.Equal(t, opName{"Relu", 14}, op)
	op, ok = kernelOp("SkipLayerNormalization", "com.microsoft", 17)
	assert.True(t, ok)
	assert.Equal(t, opName{"com.microsoft.SkipLayerNormalization", 1}, op)
	_, ok = kernelOp("Foo", "org.example", 17)
	assert.False(t, ok)
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
		if nd.Op == "Slice" {
			panic("integer divide by zero")
		}
		return nil
	}
	why, crashed := judge(&node{Node: partition.Node{Op: "Slice", Name: "s"}}, 17, supports)
	require.Error(t, why)
	assert.True(t, crashed)
	assert.Contains(t, why.Error(), "integer divide by zero")
	why, crashed = judge(&node{Node: partition.Node{Op: "Add", Name: "a"}}, 17, supports)
	assert.NoError(t, why)
	assert.False(t, crashed)
	assert.Equal(t, 2, calls)
}
