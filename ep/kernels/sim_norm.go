package kernels

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	simKernelSets = append(simKernelSets, func(m map[string]cudadrv.KernelBody) {
		for _, dt := range floatTypes {
			m["cudaep_layernorm_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simLayerNorm(l, dt) }
			for _, v := range normVariants {
				m["cudaep_layernorm_"+v+"_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simLayerNormRegs(l, dt, normPacks[v]) }
			}
			m["cudaep_bias_gelu_tanh_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simBiasGelu(l, dt) }
		}
	})
}

// simOptView returns the view of n elements at pointer argument arg, or a view of nothing when
// the argument is a null pointer (an absent optional tensor).
func simOptView(l *cudadrv.KernelLaunch, arg int, dt DType, n int) (simTensor, bool, error) {
	p := l.PtrArg(arg)
	if p == 0 {
		return simTensor{}, false, nil
	}
	v, err := simView(l, p, dt, n)
	return v, true, err
}

// simLayerNormRegs is the register variant cudaep_layernorm_<variant>_<t> of up to per packs
// per thread: simLayerNorm, after checking that the block holds a row of whole packs (the
// kernel falls back to the two-pass loop otherwise, which norm.go never launches it for).
func simLayerNormRegs(l *cudadrv.KernelLaunch, dt DType, per uint64) error {
	length, v := l.U64Arg(10), uint64(16/dt.Size())
	if length%v != 0 || length/v > per*uint64(l.Block.X) {
		return fmt.Errorf("%s: rows of %d elements do not fit %d threads of %d packs of %d", l.Name, length, l.Block.X, per, v)
	}
	return simLayerNorm(l, dt)
}

// simLayerNorm is cudaep_layernorm_<t>(y, mean, inv, sum, x, skip, gamma, beta, bias, rows,
// length, skipRows, eps, simplified), in the kernel's float32 operations and order (the
// register kernels', which hold the same packs per thread, too): v = x + skip + bias, stored
// rounded to the data type into sum; each thread of the block sums d = v − v[0] (v itself
// when simplified) and d² (a fused multiply-add) over its elements, 16-byte packs of them when
// the row and every address allow, and the block adds the threads' sums (simBlockReduce);
// then mean = v[0] + s1/n, variance max(s2/n − (s1/n)², 0) (s2/n when simplified, mean 0),
// inv = 1/sqrt(variance + eps), y = (v − mean)·inv·gamma + beta (a fused multiply-add in the
// packed loop, a product and a sum in the element loop).
func simLayerNorm(l *cudadrv.KernelLaunch, dt DType) error {
	if err := simWarpBlock(l); err != nil {
		return err
	}
	rows, length, skipRows := int(l.U64Arg(9)), int(l.U64Arg(10)), int(l.U64Arg(11))
	eps, simplified := l.F32Arg(12), l.U32Arg(13) != 0
	if length < 1 || skipRows < 1 {
		return fmt.Errorf("%s: rows %d, length %d, skip rows %d", l.Name, rows, length, skipRows)
	}
	n := rows * length
	y, err := simView(l, l.PtrArg(0), dt, n)
	if err != nil {
		return err
	}
	x, err := simView(l, l.PtrArg(4), dt, n)
	if err != nil {
		return err
	}
	gamma, err := simView(l, l.PtrArg(6), dt, length)
	if err != nil {
		return err
	}
	inv, err := simView(l, l.PtrArg(2), Float32, rows)
	if err != nil {
		return err
	}
	mean, hasMean, err := simOptView(l, 1, Float32, rows)
	if err != nil {
		return err
	}
	sum, hasSum, err := simOptView(l, 3, dt, n)
	if err != nil {
		return err
	}
	skip, hasSkip, err := simOptView(l, 5, dt, skipRows*length)
	if err != nil {
		return err
	}
	beta, hasBeta, err := simOptView(l, 7, dt, length)
	if err != nil {
		return err
	}
	bias, hasBias, err := simOptView(l, 8, dt, length)
	if err != nil {
		return err
	}
	pack := 16 / dt.Size()
	vec := length%pack == 0 && simAligned16(l, 0, 3, 4, 5, 6, 7, 8)
	if !vec {
		pack = 1
	}
	threads := int(l.Block.X)
	v := make([]float32, length)
	s1, s2 := make([]float32, threads), make([]float32, threads)
	invLen := 1 / float32(length)
	for r := range rows {
		base := int64(r * length)
		for j := range length {
			f := float32(x.float(base + int64(j)))
			if hasSkip {
				f += float32(skip.float(int64((r%skipRows)*length + j)))
			}
			if hasBias {
				f += float32(bias.float(int64(j)))
			}
			v[j] = f
			if hasSum {
				sum.setFloat(base+int64(j), float64(f))
			}
		}
		shift := float32(0)
		if !simplified {
			shift = v[0]
		}
		clear(s1)
		clear(s2)
		simThreadWalk(length, threads, pack, func(t, j int) {
			d := v[j] - shift
			s1[t] += d
			s2[t] = simFMA32(d, d, s2[t])
		})
		t1, t2 := simBlockReduce(s1, 0, simSumOp), simBlockReduce(s2, 0, simSumOp)
		m1 := t1 * invLen
		var mu, variance float32
		if simplified {
			variance = t2 * invLen
		} else {
			mu = shift + m1
			variance = simFmaxf(float32(t2*invLen)-float32(m1*m1), 0)
		}
		is := simRsqrt(variance + eps)
		if hasMean {
			mean.setFloat(int64(r), float64(mu))
		}
		inv.setFloat(int64(r), float64(is))
		for j := range length {
			g := float32(gamma.float(int64(j)))
			a := is * (v[j] - mu)
			var o float32
			switch {
			case hasBeta && vec:
				o = simFMA32(g, a, float32(beta.float(int64(j))))
			case hasBeta:
				o = float32(g*a) + float32(beta.float(int64(j)))
			default:
				o = g * a
			}
			y.setFloat(base+int64(j), float64(o))
		}
	}
	return nil
}

// simBiasGelu is cudaep_bias_gelu_tanh_<t>(out, x, bias, n, biasLen).
func simBiasGelu(l *cudadrv.KernelLaunch, dt DType) error {
	n, biasLen := int(l.U64Arg(3)), int(l.U64Arg(4))
	if biasLen < 1 || n%biasLen != 0 {
		return fmt.Errorf("%s: %d elements are not rows of %d", l.Name, n, biasLen)
	}
	v, err := simViewsOf(l, []int{0, 1, 2}, []DType{dt, dt, dt}, []int{n, n, biasLen})
	if err != nil {
		return err
	}
	gelu := refUnaryOps["GeluTanh"]
	for i := range int64(n) {
		s := float32(v[1].float(i)) + float32(v[2].float(i%int64(biasLen)))
		v[0].setFloat(i, float64(float32(gelu(float64(s)))))
	}
	return nil
}
