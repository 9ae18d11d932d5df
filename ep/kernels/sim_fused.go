package kernels

import (
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	simKernelSets = append(simKernelSets, func(m map[string]cudadrv.KernelBody) {
		for _, dt := range floatTypes {
			m["cudaep_rotate_half_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simRotateHalf(l, dt) }
			m["cudaep_rotate_half2_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simRotateHalf2(l, dt) }
			m["cudaep_silu_mul_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error {
				return simBinarySame(l, dt, dt, func(out, a, b simTensor, i int64) { out.setFloat(i, refSiluMul(a.float(i), b.float(i))) })
			}
		}
	})
}

// simRotateHalf is cudaep_rotate_half_<t>(y, x, cos, sin, rows, half, dims[6],
// cosStrides[6], sinStrides[6]): the dimensions multiply to rows, and each row's cos and sin
// start at the strided offsets of its coordinates. Like the kernel, it reads both halves of
// a row before writing either, so y may be x.
func simRotateHalf(l *cudadrv.KernelLaunch, dt DType) error {
	rows, half := l.U64Arg(4), int(l.U64Arg(5))
	if half < 1 {
		return fmt.Errorf("%s: half row of %d elements", l.Name, half)
	}
	dims, strides, err := simLayout(l, rows, 6, 2)
	if err != nil {
		return err
	}
	n := int(rows) * 2 * half
	v, err := simViewsOf(l, []int{0, 1, 2, 3}, []DType{dt, dt, dt, dt},
		[]int{n, n, simExtent(dims, strides[0]) - 1 + 2*half, simExtent(dims, strides[1]) - 1 + 2*half})
	if err != nil {
		return err
	}
	y, x, cos, sin := v[0], v[1], v[2], v[3]
	simWalk(dims, strides, func(r int, offs []int64) {
		base := int64(r * 2 * half)
		for i := range int64(half) {
			a, b := x.float(base+i), x.float(base+i+int64(half))
			y1 := refRotateHalfPair(a, b, cos.float(offs[0]+i), sin.float(offs[1]+i), -1)
			y2 := refRotateHalfPair(b, a, cos.float(offs[0]+i+int64(half)), sin.float(offs[1]+i+int64(half)), 1)
			y.setFloat(base+i, y1)
			y.setFloat(base+i+int64(half), y2)
		}
	})
	return nil
}

// simRotateHalf2 is cudaep_rotate_half2_<t>(y0, y1, x0, x1, cos, sin, rows0, rows1, half), grid
// (blocks, 2): the rotation of rows0 rows of x0 into y0 and of rows1 rows of x1 into y1, every
// row with the one row of cos and of sin. Like the kernel, it reads both halves of a row before
// writing either, so each y may be its x.
func simRotateHalf2(l *cudadrv.KernelLaunch, dt DType) error {
	half := int(l.U64Arg(8))
	if half < 1 || l.Grid.Y != 2 {
		return fmt.Errorf("%s: half row of %d elements, grid %v (y must be 2)", l.Name, half, l.Grid)
	}
	for p := range 2 {
		n := int(l.U64Arg(6+p)) * 2 * half
		v, err := simViewsOf(l, []int{p, 2 + p, 4, 5}, []DType{dt, dt, dt, dt}, []int{n, n, 2 * half, 2 * half})
		if err != nil {
			return err
		}
		y, x, cos, sin := v[0], v[1], v[2], v[3]
		for base := int64(0); base < int64(n); base += int64(2 * half) {
			for i := range int64(half) {
				a, b := x.float(base+i), x.float(base+i+int64(half))
				y.setFloat(base+i, refRotateHalfPair(a, b, cos.float(i), sin.float(i), -1))
				y.setFloat(base+i+int64(half), refRotateHalfPair(b, a, cos.float(i+int64(half)), sin.float(i+int64(half)), 1))
			}
		}
	}
	return nil
}
