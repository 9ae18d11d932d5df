package kernels_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/ep/kernels"
)

// The op benchmark (TestOpBenchTable) is driven by bench/scripts/op-bench.sh: it prints a table and,
// with EnvOpBenchJSON, writes every sample as JSON. EnvOpBenchTorch names the JSON that
// bench/baselines/torch_ops.py wrote for the same rows in the same run, which the table puts side
// by side.
const (
	EnvOpBench      = "CUDAEP_OPBENCH"
	EnvOpBenchJSON  = "CUDAEP_OPBENCH_JSON"
	EnvOpBenchTorch = "CUDAEP_OPBENCH_TORCH"
	// EnvOpBenchVariants=1 adds rows for LayerNormalization, Transpose and Add with their
	// baselines forced ("old", "nd", "stride"; variants.go) beside the default ones, the
	// default's output checked against the baseline's (bench/scripts/op-variants-gpu.sh).
	EnvOpBenchVariants = "CUDAEP_OPBENCH_VARIANTS"
	// EnvOpBenchRows, a regular expression, limits the table to the rows whose IDs it matches
	// (unanchored; bench/baselines/torch_ops.py reads it too); unset or empty: every row.
	EnvOpBenchRows = "CUDAEP_OPBENCH_ROWS"
)

// maxAbsDiff returns the largest absolute difference between the elements of dtype dt in a
// and b (NaN when only one of a pair is NaN, or the lengths differ); floats are decoded,
// other types compared as bits (0 or +Inf).
func maxAbsDiff(dt kernels.DType, a, b []byte) float64 {
	if len(a) != len(b) {
		return math.NaN()
	}
	if bytes.Equal(a, b) {
		return 0
	}
	size := dt.Size()
	worst := 0.0
	for i := 0; i < len(a); i += size {
		var x, y float64
		switch dt {
		case kernels.Float32:
			x = float64(math.Float32frombits(binary.LittleEndian.Uint32(a[i:])))
			y = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
		case kernels.Float16:
			x = float64(cudadrv.Float16Value(binary.LittleEndian.Uint16(a[i:])))
			y = float64(cudadrv.Float16Value(binary.LittleEndian.Uint16(b[i:])))
		case kernels.BFloat16:
			x = float64(cudadrv.BFloat16Value(binary.LittleEndian.Uint16(a[i:])))
			y = float64(cudadrv.BFloat16Value(binary.LittleEndian.Uint16(b[i:])))
		default:
			if !bytes.Equal(a[i:i+size], b[i:i+size]) {
				return math.Inf(1)
			}
			continue
		}
		if math.IsNaN(x) != math.IsNaN(y) {
			return math.NaN()
		}
		worst = max(worst, math.Abs(x-y))
	}
	return worst
}

// peakBytesPerSecond is the H200's memory bandwidth by its datasheet (4.8 TB/s), the
// denominator of the "of peak" column.
const peakBytesPerSecond = 4.8e12

// opBenchRow is one benchmark row: what ran, the bytes it must move and the FLOPs it does,
// and the milliseconds per call of each sample for ours and the in-process raw baseline.
type opBenchRow struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Bytes     float64   `json:"bytes_per_call"`
	FLOP      float64   `json:"flop_per_call,omitempty"`
	OursMs    []float64 `json:"ours_ms"`
	RawLabel  string    `json:"raw_label,omitempty"`
	RawMs     []float64 `json:"raw_ms,omitempty"`
	TorchMs   []float64 `json:"torch_ms,omitempty"`
	TorchNote string    `json:"torch_note,omitempty"`
	// Derived from the medians.
	OursGBps      float64 `json:"ours_gbps"`
	OfPeak        float64 `json:"ours_of_peak"`
	OursTFLOPS    float64 `json:"ours_tflops,omitempty"`
	RawTFLOPS     float64 `json:"raw_tflops,omitempty"`
	OursOverRaw   float64 `json:"ours_over_raw,omitempty"` // rate ratio: > 1 is faster
	TorchGBps     float64 `json:"torch_gbps,omitempty"`
	OursOverTorch float64 `json:"ours_over_torch,omitempty"`
}

// opBenchReport is the JSON the benchmark writes.
type opBenchReport struct {
	Tool      string       `json:"tool"`
	Date      string       `json:"date"`
	Backend   string       `json:"backend"`
	Device    string       `json:"device"`
	Method    []string     `json:"method"`
	TorchInfo string       `json:"torch_info,omitempty"`
	Rows      []opBenchRow `json:"rows"`
}

// torchResults is what torch_ops.py writes: per row ID, milliseconds per call of each sample.
type torchResults struct {
	Info  string               `json:"info"`
	Rows  map[string][]float64 `json:"rows"`
	Notes map[string]string    `json:"notes"`
}

// TestOpBenchTable measures, never asserts, memory-bound ops on 256 MiB tensors (float32 and
// float16) in bytes per second against the H200's peak and against PyTorch on the same shapes
// (from torch_ops.py, run just before in the same job), the cudaep ops SiluMul and RotateHalf
// on tensors of the same size, bfloat16 Attention of a Llama decoder's shapes (decode at T =
// 4096, prefill at 512 and 2048) in TFLOP/s, float16/bfloat16 MatMul at M = 1, 16, 512
// and 4096 (K = N = 4096) against cublasGemmEx called directly on the same buffers, and
// MatMul at M = 1 (the GEMV path) at a Llama decoder's projection shapes against the same,
// and int4 MatMulNBits (and its groups) at those shapes, M = 1 and 512, against bfloat16 MatMul.
// Device time comes from events around a batch of calls; the median of the samples is
// reported, ours and the raw baseline alternating.
func TestOpBenchTable(t *testing.T) {
	if os.Getenv(EnvOpBench) != "1" {
		t.Skip("set " + EnvOpBench + "=1 to run the op benchmark (bench/scripts/op-bench.sh)")
	}
	f := newFixture(t)
	sim := f.env.Sim != nil
	rep := opBenchReport{Tool: "ep/kernels TestOpBenchTable", Date: time.Now().UTC().Format(time.RFC3339), Backend: "cuda",
		Method: []string{
			"device time from events recorded around a batch of calls on the library's stream, after a warm-up batch; samples alternate ours and the raw baseline",
			"bytes per call are the bytes the op must read and write (inputs once, outputs once); GB/s = bytes / median time; of_peak = GB/s / 4800",
			"PyTorch runs the same op on the same shapes and dtypes in the same job (bench/baselines/torch_ops.py), with torch.cuda.Event timing of the same batch sizes",
		}}
	rep.Device = f.env.Context.Device().Name()
	if sim {
		rep.Backend = "sim"
	}
	rowFilter, err := regexp.Compile(os.Getenv(EnvOpBenchRows))
	require.NoError(t, err, EnvOpBenchRows)
	var torch torchResults
	if path := os.Getenv(EnvOpBenchTorch); path != "" {
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &torch)
		}
		if err != nil {
			t.Logf("PyTorch results %s: %v", path, err)
		}
		rep.TorchInfo = torch.Info
	}

	tensorBytes := int64(256 << 20)
	samples, batch := 15, 20
	if sim {
		tensorBytes, samples, batch = 64<<10, 3, 2
	}
	timed := func(calls int, run func() error) float64 {
		start, end := f.event(), f.event()
		require.NoError(t, run()) // warm-up
		require.NoError(t, start.Record(f.stream))
		for range calls {
			if err := run(); err != nil {
				t.Fatal(err)
			}
		}
		require.NoError(t, end.Record(f.stream))
		require.NoError(t, end.Synchronize())
		d, err := end.ElapsedSince(start)
		require.NoError(t, err)
		return float64(d.Nanoseconds()) / 1e6 / float64(calls)
	}
	measure := func(calls int, ours, raw func() error) (o, r []float64) {
		for i := range samples {
			if i%2 == 1 && raw != nil {
				r = append(r, timed(calls, raw))
			}
			o = append(o, timed(calls, ours))
			if i%2 == 0 && raw != nil {
				r = append(r, timed(calls, raw))
			}
		}
		return o, r
	}
	// fill returns a device tensor of info holding a repeating pattern of small values, or for
	// uint8 (quantized weights) random bytes, every one a valid weight.
	fill := func(in kernels.TensorInfo) kernels.Tensor {
		if in.DType == kernels.Uint8 {
			b := make([]byte, in.Bytes())
			for j := range b {
				b[j] = byte(f.rng.IntN(256))
			}
			return f.upload(in, b)
		}
		n := in.NumElements()
		period := min(n, 1<<16)
		vals := make([]float64, period)
		for i := range vals {
			vals[i] = roundTo(in.DType, 0.25+float64(i%97)/97)
		}
		one := encode(in.DType, vals)
		data := make([]byte, 0, in.Bytes())
		for int64(len(data)) < in.Bytes() {
			data = append(data, one[:min(int64(len(one)), in.Bytes()-int64(len(data)))]...)
		}
		return f.upload(in, data)
	}
	// inputs fills spec's inputs (an absent one, the zero TensorInfo, stays the zero Tensor).
	inputs := func(spec kernels.Spec) []kernels.Tensor {
		ins := make([]kernels.Tensor, len(spec.Inputs))
		for i, in := range spec.Inputs {
			if in.DType == 0 {
				continue
			}
			ins[i] = fill(in)
			if c, ok := spec.Consts[i]; ok {
				vals := make([]float64, len(c.Ints))
				for j, v := range c.Ints {
					vals[j] = float64(v)
				}
				ins[i] = f.uploadTyped(in.DType, in.Shape, vals)
			}
		}
		return ins
	}
	// specBytes is what a kernel of spec moves: its inputs once and its outputs once.
	specBytes := func(spec kernels.Spec, outs []kernels.TensorInfo) float64 {
		var moved float64
		for _, in := range spec.Inputs {
			moved += float64(in.Bytes())
		}
		for _, o := range outs {
			moved += float64(o.Bytes())
		}
		return moved
	}
	run := func(id, title string, spec kernels.Spec, bytes float64) {
		if !rowFilter.MatchString(id) {
			return
		}
		k := f.get(spec)
		ins := inputs(spec)
		outs := f.outputs(k)
		o, _ := measure(batch, func() error { return k.Execute(ins, outs) }, nil)
		rep.Rows = append(rep.Rows, opBenchRow{ID: id, Title: title, Bytes: bytes, OursMs: o})
	}
	// variants times variants of a kernel family (variants.go) on the op of spec, on the same
	// input tensors, as rows id/<variant> ("" is the family's rule: id/default), each kernel
	// built with its variant forced, the samples of the variants interleaved (sample i runs
	// them in an order rotated by i), and checks each first output against the first
	// variant's: bit for bit when tol is 0, else within tol (absolute). The check's result goes
	// into the row's title; a mismatch fails the test after the table.
	variants := func(family, id, title string, spec kernels.Spec, moved float64, tol float64, vs ...string) {
		type candidate struct {
			label, got string
			k          kernels.Kernel
			outs       []kernels.Tensor
			ms         []float64
		}
		var cs []*candidate
		for _, v := range vs {
			label := v
			if label == "" {
				label = "default"
			}
			if !rowFilter.MatchString(id + "/" + label) {
				continue
			}
			prev := kernels.ForceVariant(family, v)
			k := f.get(spec)
			kernels.ForceVariant(family, prev)
			cs = append(cs, &candidate{label: label, got: kernels.KernelVariant(k), k: k, outs: f.outputs(k)})
		}
		if len(cs) == 0 {
			return
		}
		ins := inputs(spec)
		for i := range samples {
			for j := range cs {
				c := cs[(i+j)%len(cs)]
				c.ms = append(c.ms, timed(batch, func() error { return c.k.Execute(ins, c.outs) }))
			}
		}
		var ref []byte
		for _, c := range cs {
			row := opBenchRow{ID: id + "/" + c.label, Title: fmt.Sprintf("%s [%s: %s]", title, family, c.got), Bytes: moved, OursMs: c.ms}
			out := f.download(c.outs[0])
			switch {
			case ref == nil:
				ref = out
			case tol == 0:
				same := bytes.Equal(ref, out)
				row.Title += fmt.Sprintf(" bit-identical to %s: %v", cs[0].label, same)
				if !same {
					t.Errorf("%s: output differs from %s's (max |diff| %g)", row.ID, cs[0].label, maxAbsDiff(spec.Inputs[0].DType, ref, out))
				}
			default:
				diff := maxAbsDiff(spec.Inputs[0].DType, ref, out)
				row.Title += fmt.Sprintf(" max |diff| vs %s: %g", cs[0].label, diff)
				if diff > tol || math.IsNaN(diff) {
					t.Errorf("%s: output differs from %s's by up to %g (allowed %g)", row.ID, cs[0].label, diff, tol)
				}
			}
			rep.Rows = append(rep.Rows, row)
		}
	}

	for _, dt := range []kernels.DType{kernels.Float32, kernels.Float16} {
		n := tensorBytes / int64(dt.Size())
		tb := float64(tensorBytes)
		sfx := dt.String()
		flatInfo := info(dt, n)
		hidden := int64(4096)
		if sim {
			hidden = 256
		}
		rowsInfo := info(dt, n/hidden, hidden)
		run("add/"+sfx, fmt.Sprintf("Add %s[%d] + [%d]", sfx, n, n), kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{flatInfo, flatInfo}}, 3*tb)
		run("sigmoid/"+sfx, fmt.Sprintf("Sigmoid %s[%d]", sfx, n), kernels.Spec{Op: "Sigmoid", Opset: 13, Inputs: []kernels.TensorInfo{flatInfo}}, 2*tb)
		run("layernorm/"+sfx, fmt.Sprintf("LayerNormalization %s[%d,%d] over the last axis, with Scale and B", sfx, n/hidden, hidden),
			kernels.Spec{Op: "LayerNormalization", Opset: 17, Inputs: []kernels.TensorInfo{rowsInfo, info(dt, hidden), info(dt, hidden)}},
			2*tb+float64(2*hidden*int64(dt.Size())+2*4*(n/hidden)))
		run("reducesum/"+sfx, fmt.Sprintf("ReduceSum %s[%d,%d] over the last axis", sfx, n/hidden, hidden),
			kernels.Spec{Op: "ReduceSum", Opset: 13, Inputs: []kernels.TensorInfo{rowsInfo, info(kernels.Int64, 1)},
				Attrs: map[string]kernels.Attribute{"keepdims": kernels.IntAttr(0)}, Consts: map[int]kernels.Const{1: kernels.IntsConst(1)}},
			tb+float64((n/hidden)*int64(dt.Size())))
		side := int64(8192)
		if sim {
			side = 128
		}
		run("transpose/"+sfx, fmt.Sprintf("Transpose %s[%d,%d] perm [1,0]", sfx, side, n/side),
			kernels.Spec{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, side, n/side)}}, 2*tb)
		run("silumul/"+sfx, fmt.Sprintf("cudaep.SiluMul %s[%d] · [%d]", sfx, n, n),
			kernels.Spec{Op: "cudaep.SiluMul", Opset: 1, Inputs: []kernels.TensorInfo{flatInfo, flatInfo}}, 3*tb)
		rows := n / (32 * 64)
		run("rotatehalf/"+sfx, fmt.Sprintf("cudaep.RotateHalf %s[1,32,%d,64] with cos, sin [1,1,%d,64]", sfx, rows, rows),
			kernels.Spec{Op: "cudaep.RotateHalf", Opset: 1, Inputs: []kernels.TensorInfo{info(dt, 1, 32, rows, 64), info(dt, 1, 1, rows, 64), info(dt, 1, 1, rows, 64)}},
			2*tb+2*tb/32)
		if os.Getenv(EnvOpBenchVariants) == "1" {
			lnSpec := kernels.Spec{Op: "LayerNormalization", Opset: 17, Inputs: []kernels.TensorInfo{rowsInfo, info(dt, hidden), info(dt, hidden)}}
			tol := 1e-5
			if dt != kernels.Float32 {
				tol = 2e-3 // one float16 ulp at 2
			}
			// Each family's baseline (variants.go) beside the kernel its rule picks.
			variants("layernorm", "layernorm/"+sfx, fmt.Sprintf("LayerNormalization %s[%d,%d]", sfx, n/hidden, hidden), lnSpec,
				2*tb+float64(2*hidden*int64(dt.Size())+2*4*(n/hidden)), tol, "old", "")
			variants("transpose2d", "transpose/"+sfx, fmt.Sprintf("Transpose %s[%d,%d] perm [1,0]", sfx, side, n/side),
				kernels.Spec{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, side, n/side)}}, 2*tb, 0, "nd", "")
			// The transformer's case: the last two axes of a batch of matrices swapped.
			batch, m := int64(16), int64(2048)
			if sim {
				batch, m = 2, 64
			}
			variants("transpose2d", "transpose3d/"+sfx, fmt.Sprintf("Transpose %s[%d,%d,%d] perm [0,2,1]", sfx, batch, m, n/batch/m),
				kernels.Spec{Op: "Transpose", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, batch, m, n/batch/m)},
					Attrs: map[string]kernels.Attribute{"perm": kernels.IntsAttr(0, 2, 1)}}, 2*tb, 0, "nd", "")
			// The same-shape float binaries: the capped grid-stride grid ("stride") beside the
			// flat default, one pack a thread, bit for bit.
			variants("elementwise", "add/"+sfx, fmt.Sprintf("Add %s[%d] + [%d]", sfx, n, n),
				kernels.Spec{Op: "Add", Opset: 14, Inputs: []kernels.TensorInfo{flatInfo, flatInfo}}, 3*tb, 0, "stride", "")
		}
	}
	// A decode step's cache update as torch.onnx exports a static cache: Where of the position
	// mask, the new key row and the cache of one layer (bfloat16, 8 key-value heads, head size
	// 64) into the other cache buffer, or into the cache itself ("inplace": one buffer bound as
	// both past and present; the bytes counted are the mask and the row it stores).
	for _, m := range []int64{192, 2112} {
		for _, inPlace := range []bool{false, true} {
			id := fmt.Sprintf("where/bf16/cache%d", m)
			if inPlace {
				id += "/inplace"
			}
			n := m
			if sim {
				n /= 16
			}
			if !rowFilter.MatchString(id) {
				continue
			}
			bf := kernels.BFloat16
			spec := kernels.Spec{Op: "Where", Opset: 16, Inputs: []kernels.TensorInfo{info(kernels.Bool, 1, 1, n, 1), info(bf, 1, 8, 1, 64), info(bf, 1, 8, n, 64)}}
			k := f.get(spec)
			ins, outs := inputs(spec), f.outputs(k)
			bytes := float64(n + 2*8*64 + 2*2*8*n*64)
			if inPlace {
				outs = []kernels.Tensor{ins[2]}
				bytes = float64(n + 2*2*8*64)
			}
			kind := "into another buffer"
			if kernels.LaunchVariant(k, ins, outs) == "update" {
				kind = "in place: the update kernel"
			}
			o, _ := measure(10*batch, func() error { return k.Execute(ins, outs) }, nil)
			rep.Rows = append(rep.Rows, opBenchRow{ID: id, Title: fmt.Sprintf("Where bool[1,1,%d,1], bf16[1,8,1,64], bf16[1,8,%d,64] [%d blocks, %s]", n, n, kernels.LaunchGrid(k).X, kind),
				Bytes: bytes, OursMs: o})
		}
	}

	// The device-to-device copy of one tensor: what the memory system gives a plain copy.
	if rowFilter.MatchString("copy") {
		src, dst := f.alloc(info(kernels.Float32, tensorBytes/4)), f.alloc(info(kernels.Float32, tensorBytes/4))
		o, _ := measure(batch, func() error { return f.stream.CopyDtoDAsync(dst.Ptr, src.Ptr, uint64(tensorBytes)) }, nil)
		rep.Rows = append(rep.Rows, opBenchRow{ID: "copy", Title: fmt.Sprintf("cuMemcpyDtoDAsync of %d MiB (reference)", tensorBytes>>20), Bytes: 2 * float64(tensorBytes), OursMs: o})
	}

	// Attention as a Llama decoder runs it (bfloat16, 32 query heads, 8 key-value heads, head
	// size 64): decode against a long cache with its mask, prefill with is_causal and with a
	// mask (the fill's values: no key tile is skipped, the mask's worst case).
	attnSeqs := [][2]int64{{1, 192}, {1, 2112}, {1, 4096}, {2048, 2048}, {512, 512}}
	if sim {
		attnSeqs = [][2]int64{{1, 256}, {64, 64}, {32, 32}}
	}
	for i, st := range attnSeqs {
		dt, seq, kv := kernels.BFloat16, st[0], st[1]
		spec := kernels.Spec{Op: "Attention", Opset: 23, Attrs: map[string]kernels.Attribute{},
			Inputs: []kernels.TensorInfo{info(dt, 1, 32, seq, 64), info(dt, 1, 8, kv, 64), info(dt, 1, 8, kv, 64)}}
		flop := 4 * 32 * float64(seq*kv) * 64
		what := "mask [1,1,S,T]"
		if i == 1 {
			spec.Attrs["is_causal"] = kernels.IntAttr(1)
			flop, what = flop/2, "is_causal"
		} else {
			spec.Inputs = append(spec.Inputs, info(dt, 1, 1, seq, kv))
		}
		id := fmt.Sprintf("attention/bf16/s%d/t%d", seq, kv)
		if !rowFilter.MatchString(id) {
			continue
		}
		k := f.get(spec)
		ins, outs := inputs(spec), f.outputs(k)
		o, _ := measure(batch, func() error { return k.Execute(ins, outs) }, nil)
		path, n := kernels.AttentionPlan(k)
		rep.Rows = append(rep.Rows, opBenchRow{ID: id, Title: fmt.Sprintf("Attention bf16 Q [1,32,%d,64], K, V [1,8,%d,64], %s [%s %d]", seq, kv, what, path, n),
			Bytes: specBytes(spec, k.Outputs()), FLOP: flop, OursMs: o})
	}

	// GEMM: ep MatMul against GemmEx on the same buffers.
	kn := int64(4096)
	ms := []int64{1, 16, 512, 4096}
	if sim {
		kn, ms = 64, []int64{1, 16}
	}
	for _, dt := range []kernels.DType{kernels.Float16, kernels.BFloat16} {
		for _, m := range ms {
			if !rowFilter.MatchString(fmt.Sprintf("matmul/%s/m%d", dt, m)) {
				continue
			}
			spec := kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, m, kn), info(dt, kn, kn)}}
			k := f.get(spec)
			a, b := fill(spec.Inputs[0]), fill(spec.Inputs[1])
			y := f.outputs(k)[0]
			typ := cudadrv.BLASFloat16
			if dt == kernels.BFloat16 {
				typ = cudadrv.BLASBFloat16
			}
			p := &cudadrv.GemmParams{TransA: cudadrv.OpN, TransB: cudadrv.OpN, M: int(kn), N: int(m), K: int(kn),
				Alpha: 1, A: b.Ptr, B: a.Ptr, C: y.Ptr, LDA: int(kn), LDB: int(kn), LDC: int(kn), Type: typ}
			ins, outs := []kernels.Tensor{a, b}, []kernels.Tensor{y}
			calls := batch
			if m <= 16 {
				calls = 10 * batch
			}
			o, r := measure(calls, func() error { return k.Execute(ins, outs) }, func() error { return f.blas.GemmEx(p) })
			size := float64(dt.Size())
			rep.Rows = append(rep.Rows, opBenchRow{ID: fmt.Sprintf("matmul/%s/m%d", dt, m),
				Title: fmt.Sprintf("MatMul %s [%d,%d]x[%d,%d]", dt, m, kn, kn, kn), Bytes: size * float64(m*kn+kn*kn+m*kn),
				FLOP: 2 * float64(m*kn*kn), OursMs: o, RawLabel: "cublasGemmEx (Go cudadrv, same buffers)", RawMs: r})
		}
	}

	// Decode's projections, MatMul [1,1,K]×[K,N] at Llama-3.2-1B's shapes (attention output,
	// key and value, MLP up and down, LM head): the GEMV path against cublasGemmEx on the same
	// buffers, and with EnvOpBenchVariants ep's MatMul with cuBLAS forced ("matmul" family)
	// beside the GEMV, the outputs compared within one rounding of the largest output.
	gemvShapes := [][2]int64{{2048, 2048}, {2048, 512}, {2048, 8192}, {8192, 2048}, {2048, 32000}}
	if sim {
		gemvShapes = [][2]int64{{256, 256}, {128, 64}, {64, 512}}
	}
	for _, dt := range []kernels.DType{kernels.Float16, kernels.BFloat16} {
		size := float64(dt.Size())
		for _, kn := range gemvShapes {
			kk, n := kn[0], kn[1]
			id := fmt.Sprintf("matmul/%s/m1/k%dn%d", dt, kk, n)
			spec := kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(dt, 1, 1, kk), info(dt, kk, n)}}
			title := fmt.Sprintf("MatMul %s [1,1,%d]x[%d,%d]", dt, kk, kk, n)
			moved := size * float64(kk+kk*n+n)
			if rowFilter.MatchString(id) {
				k := f.get(spec)
				a, b := fill(spec.Inputs[0]), fill(spec.Inputs[1])
				y := f.outputs(k)[0]
				typ := cudadrv.BLASFloat16
				if dt == kernels.BFloat16 {
					typ = cudadrv.BLASBFloat16
				}
				p := &cudadrv.GemmParams{TransA: cudadrv.OpN, TransB: cudadrv.OpN, M: int(n), N: 1, K: int(kk),
					Alpha: 1, A: b.Ptr, B: a.Ptr, C: y.Ptr, LDA: int(n), LDB: int(kk), LDC: int(n), Type: typ}
				ins, outs := []kernels.Tensor{a, b}, []kernels.Tensor{y}
				o, r := measure(10*batch, func() error { return k.Execute(ins, outs) }, func() error { return f.blas.GemmEx(p) })
				tiles, chunks, rows := kernels.GemvGrid(k)
				rep.Rows = append(rep.Rows, opBenchRow{ID: id,
					Title: fmt.Sprintf("%s [%s: %d tiles x %d chunks of %d rows]", title, kernels.LaunchVariant(k, ins, outs), tiles, chunks, rows),
					Bytes: moved, FLOP: 2 * float64(kk*n), OursMs: o, RawLabel: "cublasGemmEx (Go cudadrv, same buffers)", RawMs: r})
			}
			if os.Getenv(EnvOpBenchVariants) == "1" {
				// fill's values are in [0.25, 1.25): every output is below K·1.25², and the two
				// float32 sums differ by far less than one rounding to dt there.
				mant := 7.0
				if dt == kernels.Float16 {
					mant = 10
				}
				tol := math.Exp2(math.Floor(math.Log2(float64(kk)*1.25*1.25)) - mant)
				variants("matmul", id, title, spec, moved, tol, "cublas", "")
			}
		}
	}

	// The projections a decode step joins (cudaep.MatMulGroup: q, k and v; gate and up) in one
	// launch, against the same MatMuls' GEMVs one after another on the same buffers.
	groups := []struct {
		id string
		k  int64
		ns []int64
	}{{"qkv", 2048, []int64{2048, 512, 512}}, {"gateup", 2048, []int64{8192, 8192}}}
	if sim {
		groups = groups[:1]
		groups[0].k, groups[0].ns = 128, []int64{256, 64, 64}
	}
	for _, dt := range []kernels.DType{kernels.Float16, kernels.BFloat16} {
		for _, gr := range groups {
			id := fmt.Sprintf("matmulgroup/%s/%s", dt, gr.id)
			if !rowFilter.MatchString(id) {
				continue
			}
			spec := kernels.Spec{Op: "cudaep.MatMulGroup", Opset: 1, Inputs: []kernels.TensorInfo{info(dt, 1, 1, gr.k)}, NumOutputs: len(gr.ns)}
			for _, n := range gr.ns {
				spec.Inputs = append(spec.Inputs, info(dt, gr.k, n))
			}
			k := f.get(spec)
			ins := inputs(spec)
			outs := f.outputs(k)
			var parts []step
			moved := float64(dt.Size()) * float64(gr.k)
			for i, n := range gr.ns {
				pk := f.get(kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{spec.Inputs[0], spec.Inputs[1+i]}})
				parts = append(parts, step{pk, []kernels.Tensor{ins[0], ins[1+i]}, outs[i : i+1]})
				moved += float64(dt.Size()) * float64(gr.k*n+n)
			}
			o, r := measure(10*batch, func() error { return k.Execute(ins, outs) }, func() error {
				for _, st := range parts {
					if err := st.k.Execute(st.ins, st.out); err != nil {
						return err
					}
				}
				return nil
			})
			tiles, chunks, rows := kernels.GemvGrid(k)
			rep.Rows = append(rep.Rows, opBenchRow{ID: id,
				Title: fmt.Sprintf("cudaep.MatMulGroup %s [1,1,%d]x[%d,%v] [%s: %d tiles x %d chunks of %d rows]", dt, gr.k, gr.k, gr.ns, kernels.LaunchVariant(k, ins, outs), tiles, chunks, rows),
				Bytes: moved, FLOP: moved / float64(dt.Size()) * 2, OursMs: o,
				RawLabel: "the same MatMuls one by one (ep GEMV, same buffers)", RawMs: r})
		}
	}

	// The groups that compute their row in the GEMV launch (a decode step's residual Add and
	// RMSNorm before q, k and v; its gated SiLU before the down projection), against the ops
	// they fuse run one after another on the same buffers: the normalization (or SiluMul) into
	// a row, then the group (or MatMul) over it.
	prologues := []struct {
		id, op, alone string
		k             int64
		ns            []int64
	}{
		{"skipnormgroup/qkv", "cudaep.SkipNormMatMulGroup", "com.microsoft.SkipSimplifiedLayerNormalization", 2048, []int64{2048, 512, 512}},
		{"skipnormgroup/gateup", "cudaep.SkipNormMatMulGroup", "com.microsoft.SkipSimplifiedLayerNormalization", 2048, []int64{8192, 8192}},
		{"silugroup/down", "cudaep.SiluMulMatMulGroup", "cudaep.SiluMul", 8192, []int64{2048}},
	}
	if sim {
		prologues = append(prologues[:1], prologues[2])
		prologues[0].k, prologues[0].ns = 128, []int64{256, 64, 64}
		prologues[1].k, prologues[1].ns = 256, []int64{128}
	}
	for _, dt := range []kernels.DType{kernels.Float16, kernels.BFloat16} {
		for _, pr := range prologues {
			id := strings.Replace(pr.id, "/", "/"+dt.String()+"/", 1) // e.g. silugroup/bfloat16/down
			if !rowFilter.MatchString(id) {
				continue
			}
			row := info(dt, 1, 1, pr.k)
			aloneSpec := kernels.Spec{Op: pr.alone, Opset: 1, Inputs: []kernels.TensorInfo{row, row}}
			spec := kernels.Spec{Op: pr.op, Opset: 1, Inputs: []kernels.TensorInfo{row, row}, NumOutputs: len(pr.ns)}
			if pr.op == "cudaep.SkipNormMatMulGroup" {
				aloneSpec.Inputs = append(aloneSpec.Inputs, info(dt, pr.k))
				aloneSpec.NumOutputs = 4
				spec.Inputs = append(spec.Inputs, info(dt, pr.k))
				spec.NumOutputs++ // the sum, as the decoder's next residual Add reads it
			}
			groupSpec := kernels.Spec{Op: "cudaep.MatMulGroup", Opset: 1, Inputs: []kernels.TensorInfo{row}, NumOutputs: len(pr.ns)}
			for _, n := range pr.ns {
				spec.Inputs = append(spec.Inputs, info(dt, pr.k, n))
				groupSpec.Inputs = append(groupSpec.Inputs, info(dt, pr.k, n))
			}
			k, alone, group := f.get(spec), f.get(aloneSpec), f.get(groupSpec)
			ins := inputs(spec)
			outs := f.outputs(k)
			aloneOuts := f.outputs(alone)
			rowIns := len(aloneSpec.Inputs)
			aloneStep := step{alone, ins[:rowIns], aloneOuts}
			groupStep := step{group, append([]kernels.Tensor{aloneOuts[0]}, ins[rowIns:]...), outs[:len(pr.ns)]}
			moved := float64(dt.Size()) * float64(rowIns*int(pr.k))
			for _, n := range pr.ns {
				moved += float64(dt.Size()) * float64(pr.k*n+n)
			}
			o, r := measure(10*batch, func() error { return k.Execute(ins, outs) }, func() error {
				for _, st := range []step{aloneStep, groupStep} {
					if err := st.k.Execute(st.ins, st.out); err != nil {
						return err
					}
				}
				return nil
			})
			tiles, chunks, rows := kernels.GemvGrid(k)
			rep.Rows = append(rep.Rows, opBenchRow{ID: id,
				Title: fmt.Sprintf("%s %s [1,1,%d]x[%d,%v] [%s: %d tiles x %d chunks of %d rows]", pr.op, dt, pr.k, pr.k, pr.ns, kernels.LaunchVariant(k, ins, outs), tiles, chunks, rows),
				Bytes: moved, FLOP: 2 * (moved/float64(dt.Size()) - float64(rowIns)*float64(pr.k)), OursMs: o,
				RawLabel: pr.alone + " then the GEMV (ep, same buffers)", RawMs: r})
		}
	}

	// Int4 weight-only projections (com.microsoft.MatMulNBits: 4 bits, block 32, symmetric,
	// bfloat16 and float16 A and scales; ONNX Runtime's quantizer writes float16 Llamas): at the decode shapes
	// above against the bfloat16 GEMV of the same shape (the bytes the int4 weights replace),
	// cudaep.MatMulNBitsGroup over q, k and v and over gate and up, and at M = 512 (prefill:
	// the dequantized tile through cuBLAS) against the bfloat16 MatMul. The bytes counted are
	// the packed weights, the scales, A and Y.
	for _, bf := range []kernels.DType{kernels.BFloat16, kernels.Float16} {
		short := map[kernels.DType]string{kernels.BFloat16: "bf16", kernels.Float16: "f16"}[bf]
		for _, m := range []int64{1, 512} {
			if sim && m > 1 {
				m = 17
			}
			for _, kn := range gemvShapes {
				kk, n := kn[0], kn[1]
				id := fmt.Sprintf("matmulnbits/%s/q4/m%d/k%dn%d", short, m, kk, n)
				if !rowFilter.MatchString(id) {
					continue
				}
				spec := nbitsCase{dt: bf, bits: 4, bs: 32, k: kk, n: n, lead: []int64{1, m}}.spec()
				k := f.get(spec)
				ins, outs := inputs(spec), f.outputs(k)
				dense := f.get(kernels.Spec{Op: "MatMul", Opset: 13, Inputs: []kernels.TensorInfo{info(bf, 1, m, kk), info(bf, kk, n)}})
				dIns := []kernels.Tensor{ins[0], fill(info(bf, kk, n))}
				dOuts := f.outputs(dense)
				calls := batch
				if m == 1 {
					calls = 10 * batch
				}
				o, r := measure(calls, func() error { return k.Execute(ins, outs) }, func() error { return dense.Execute(dIns, dOuts) })
				rep.Rows = append(rep.Rows, opBenchRow{ID: id,
					Title: fmt.Sprintf("MatMulNBits q4 bs32 %s [1,%d,%d]x[%d,%d] [%s]", short, m, kk, kk, n, kernels.LaunchVariant(k, ins, outs)),
					Bytes: specBytes(spec, k.Outputs()), FLOP: 2 * float64(m*kk*n), OursMs: o,
					RawLabel: "ep bfloat16 MatMul of the same shape", RawMs: r})
			}
		}
		for _, gr := range groups {
			id := "matmulnbitsgroup/" + short + "/q4/" + gr.id
			if !rowFilter.MatchString(id) {
				continue
			}
			var cs []nbitsCase
			var parts []step
			for _, n := range gr.ns {
				cs = append(cs, nbitsCase{dt: bf, bits: 4, bs: 32, k: gr.k, n: n, lead: []int64{1, 1}})
			}
			spec := nbitsGroupSpec(cs)
			k := f.get(spec)
			ins, outs := inputs(spec), f.outputs(k)
			for i, c := range cs {
				one := f.get(c.spec())
				parts = append(parts, step{one, []kernels.Tensor{ins[0], ins[1+4*i], ins[2+4*i]}, outs[i : i+1]})
			}
			o, r := measure(10*batch, func() error { return k.Execute(ins, outs) }, func() error {
				for _, st := range parts {
					if err := st.k.Execute(st.ins, st.out); err != nil {
						return err
					}
				}
				return nil
			})
			rep.Rows = append(rep.Rows, opBenchRow{ID: id,
				Title: fmt.Sprintf("cudaep.MatMulNBitsGroup q4 bs32 %s [1,1,%d]x[%d,%v] [%s]", short, gr.k, gr.k, gr.ns, kernels.LaunchVariant(k, ins, outs)),
				Bytes: specBytes(spec, k.Outputs()), OursMs: o,
				RawLabel: "the same MatMulNBits one by one (same buffers)", RawMs: r})
		}
	}

	for i := range rep.Rows {
		r := &rep.Rows[i]
		om := median(r.OursMs)
		r.OursGBps = r.Bytes / om / 1e6
		r.OfPeak = r.OursGBps * 1e9 / peakBytesPerSecond
		if r.FLOP > 0 {
			r.OursTFLOPS = r.FLOP / om / 1e9
		}
		if len(r.RawMs) > 0 {
			rm := median(r.RawMs)
			r.OursOverRaw = rm / om
			r.RawTFLOPS = r.FLOP / rm / 1e9
		}
		if ts, ok := torch.Rows[r.ID]; ok && len(ts) > 0 {
			r.TorchMs = ts
			r.TorchGBps = r.Bytes / median(ts) / 1e6
			r.OursOverTorch = median(ts) / om
		}
		r.TorchNote = torch.Notes[r.ID]
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\nep/kernels op benchmark on %s (%s); medians of %d samples; ratios are rates (> 1: ours faster)\n", rep.Backend, rep.Device, samples)
	if sim {
		sb.WriteString("SIMULATED DEVICE: not performance numbers\n")
	}
	fmt.Fprintf(&sb, "%-36s %10s %9s %7s %10s %8s %10s %10s %8s\n", "row", "ours ms", "GB/s", "of peak", "torch GB/s", "vs torch", "TFLOP/s", "raw TFLOP", "vs raw")
	for _, r := range rep.Rows {
		opt := func(v float64, format string) string {
			if v == 0 || math.IsNaN(v) {
				return "-"
			}
			return fmt.Sprintf(format, v)
		}
		fmt.Fprintf(&sb, "%-36s %10.4f %9.1f %7.3f %10s %8s %10s %10s %8s\n", r.ID, median(r.OursMs), r.OursGBps, r.OfPeak,
			opt(r.TorchGBps, "%.1f"), opt(r.OursOverTorch, "%.3f"), opt(r.OursTFLOPS, "%.1f"), opt(r.RawTFLOPS, "%.1f"), opt(r.OursOverRaw, "%.3f"))
	}
	for _, r := range rep.Rows {
		if strings.Contains(r.Title, "] [") {
			fmt.Fprintf(&sb, "%-36s %s\n", r.ID, r.Title)
		}
	}
	fmt.Print(sb.String())
	t.Log(sb.String())
	if path := os.Getenv(EnvOpBenchJSON); path != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	}
}
