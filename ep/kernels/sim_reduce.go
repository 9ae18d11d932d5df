package kernels

import (
	"fmt"
	"math"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	simKernelSets = append(simKernelSets, func(m map[string]cudadrv.KernelBody) {
		for _, stem := range []string{"sum", "max"} {
			for _, dt := range floatTypes {
				m["cudaep_reduce_rows_"+stem+"_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simReduceRows(l, dt, stem) }
				m["cudaep_reduce_strided_"+stem+"_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simReduceStrided(l, dt, stem) }
			}
		}
	})
}

// simReduceOp returns the float32 combine of a reduction ("sum" or "max": rowreduce.cuh's
// SumOp and MaxOp) and its identity.
func simReduceOp(op string) (func(a, b float32) float32, float32) {
	if op == "sum" {
		return simSumOp, 0
	}
	return simMaxOp, float32(math.Inf(-1))
}

// simReduceRows is cudaep_reduce_rows_<op>_<t>(out, x, rows, length, scale), in the kernel's
// float32 order: each thread of the block combines its elements (16-byte packs of them when
// the row and the address allow), the block combines the threads' (simBlockReduce), and the
// result times scale is rounded to the data type.
func simReduceRows(l *cudadrv.KernelLaunch, dt DType, op string) error {
	if err := simWarpBlock(l); err != nil {
		return err
	}
	rows, length, scale := int(l.U64Arg(2)), int(l.U64Arg(3)), l.F32Arg(4)
	v, err := simViewsOf(l, []int{0, 1}, []DType{dt, dt}, []int{rows, rows * length})
	if err != nil {
		return err
	}
	combine, identity := simReduceOp(op)
	pack := 16 / dt.Size()
	if length%pack != 0 || !simAligned16(l, 1) {
		pack = 1
	}
	acc := make([]float32, l.Block.X)
	for r := range rows {
		for t := range acc {
			acc[t] = identity
		}
		base := int64(r * length)
		simThreadWalk(length, len(acc), pack, func(t, j int) {
			acc[t] = combine(acc[t], float32(v[1].float(base+int64(j))))
		})
		v[0].setFloat(int64(r), float64(simBlockReduce(acc, identity, combine)*scale))
	}
	return nil
}

// simReduceStrided is cudaep_reduce_strided_<op>_<t>(out, x, n, kd[3], ks[3], rd[3], rs[3],
// scale): one thread per output combining its elements in float32, in the kernel's order.
func simReduceStrided(l *cudadrv.KernelLaunch, dt DType, op string) error {
	n := int64(l.U64Arg(2))
	var kd, ks, rd, rs [maxReduceGroups]int64
	for i := range maxReduceGroups {
		kd[i], ks[i], rd[i], rs[i] = l.I64Arg(3+i), l.I64Arg(6+i), l.I64Arg(9+i), l.I64Arg(12+i)
		if kd[i] < 1 || rd[i] < 1 || ks[i] < 0 || rs[i] < 0 {
			return fmt.Errorf("%s: dimension %d: kept %d stride %d, reduced %d stride %d", l.Name, i, kd[i], ks[i], rd[i], rs[i])
		}
	}
	scale := l.F32Arg(15)
	if kd[0]*kd[1]*kd[2] != n {
		return fmt.Errorf("%s: kept dimensions %v hold %d outputs, n is %d", l.Name, kd, kd[0]*kd[1]*kd[2], n)
	}
	extent := int64(1)
	for i := range maxReduceGroups {
		extent += (kd[i]-1)*ks[i] + (rd[i]-1)*rs[i]
	}
	out, err := simView(l, l.PtrArg(0), dt, int(n))
	if err != nil {
		return err
	}
	x, err := simView(l, l.PtrArg(1), dt, int(extent))
	if err != nil {
		return err
	}
	combine, identity := simReduceOp(op)
	for i := range n {
		q, base := i, int64(0)
		for j := maxReduceGroups - 1; j >= 0; j-- {
			base += (q % kd[j]) * ks[j]
			q /= kd[j]
		}
		acc := identity
		for a := range rd[0] {
			for b := range rd[1] {
				for c := range rd[2] {
					acc = combine(acc, float32(x.float(base+a*rs[0]+b*rs[1]+c*rs[2])))
				}
			}
		}
		out.setFloat(i, float64(acc*scale))
	}
	return nil
}
