package kernels

import (
	"encoding/binary"
	"fmt"

	"github.com/cudaep/cudaep/cudadrv"
)

func init() {
	simKernelSets = append(simKernelSets, func(m map[string]cudadrv.KernelBody) {
		for i, u := range unitSuffixes {
			size := 1 << i
			m["cudaep_copy2d_"+u] = func(l *cudadrv.KernelLaunch) error { return simCopy2D(l, size) }
			for _, it := range intTypes {
				m["cudaep_gather_"+u+"_"+it.suffix()] = func(l *cudadrv.KernelLaunch) error { return simGather(l, size, it) }
			}
		}
		for _, sfx := range []string{"b8", "b16", "b32", "b64"} {
			dt := sizeType(sfx)
			m["cudaep_trilu_"+sfx] = func(l *cudadrv.KernelLaunch) error { return simTrilu(l, dt.Size()) }
			m["cudaep_fill_"+sfx] = func(l *cudadrv.KernelLaunch) error { return simFill(l, dt.Size()) }
			m["cudaep_transpose_"+sfx] = func(l *cudadrv.KernelLaunch) error { return simTranspose(l, dt) }
		}
		for _, sfx := range []string{"b8", "b16", "b32", "b64"} {
			dt := sizeType(sfx)
			m["cudaep_transpose2d_tile64_"+sfx] = func(l *cudadrv.KernelLaunch) error { return simTranspose2D(l, dt, "tile64") }
		}
		m["cudaep_transpose2d_pair8_b16"] = func(l *cudadrv.KernelLaunch) error { return simTranspose2D(l, sizeType("b16"), "pair8") }
		m["cudaep_transpose2d_pair4_b32"] = func(l *cudadrv.KernelLaunch) error { return simTranspose2D(l, sizeType("b32"), "pair4") }
		m["cudaep_write8_b64"] = simWrite8
		for _, dt := range []DType{Float32, Float64, Int32, Int64} {
			m["cudaep_range_"+dt.suffix()] = func(l *cudadrv.KernelLaunch) error { return simRange(l, dt) }
		}
	})
}

// simBytes returns the n bytes at pointer argument arg.
func simBytes(l *cudadrv.KernelLaunch, arg int, n uint64) ([]byte, error) {
	return l.Bytes(l.PtrArg(arg), n)
}

// simCopy2D is cudaep_copy2d_<unit>(dst, src, rows, cols, dstPitch, srcPitch), in units of
// size bytes.
func simCopy2D(l *cudadrv.KernelLaunch, size int) error {
	rows, cols, dp, sp := l.U64Arg(2), l.U64Arg(3), l.U64Arg(4), l.U64Arg(5)
	if rows == 0 || cols == 0 || dp < cols || sp < cols {
		return fmt.Errorf("%s: rows %d, cols %d, pitches %d and %d", l.Name, rows, cols, dp, sp)
	}
	u := uint64(size)
	dst, err := simBytes(l, 0, ((rows-1)*dp+cols)*u)
	if err != nil {
		return err
	}
	src, err := simBytes(l, 1, ((rows-1)*sp+cols)*u)
	if err != nil {
		return err
	}
	for r := range rows {
		copy(dst[r*dp*u:(r*dp+cols)*u], src[r*sp*u:(r*sp+cols)*u])
	}
	return nil
}

// simGather is cudaep_gather_<unit>_<i32|i64>(out, data, idx, outer, nidx, axisDim, inner,
// fault, id), inner in units of size bytes: an index outside [-axisDim, axisDim) gives zeros
// and is recorded in the fault word (input 1, the index's value).
func simGather(l *cudadrv.KernelLaunch, size int, it DType) error {
	outer, nidx, axisDim, inner := l.U64Arg(3), l.U64Arg(4), l.I64Arg(5), l.U64Arg(6)
	if axisDim < 1 {
		return fmt.Errorf("%s: axis dimension %d", l.Name, axisDim)
	}
	row := inner * uint64(size)
	out, err := simBytes(l, 0, outer*nidx*row)
	if err != nil {
		return err
	}
	data, err := simBytes(l, 1, outer*uint64(axisDim)*row)
	if err != nil {
		return err
	}
	idx, err := simView(l, l.PtrArg(2), it, int(nidx))
	if err != nil {
		return err
	}
	for o := range outer {
		for i := range nidx {
			dst := out[(o*nidx+i)*row : (o*nidx+i+1)*row]
			k := idx.int(int64(i))
			if k < 0 {
				k += axisDim
			}
			if k < 0 || k >= axisDim {
				clear(dst)
				if err := simRecordFault(l, 7, 1, idx.int(int64(i))); err != nil {
					return err
				}
				continue
			}
			at := (o*uint64(axisDim) + uint64(k)) * row
			copy(dst, data[at:at+row])
		}
	}
	return nil
}

// simTrilu is cudaep_trilu_<size>(out, in, n, rows, cols, k, upper).
func simTrilu(l *cudadrv.KernelLaunch, size int) error {
	n, rows, cols, k, upper := l.U64Arg(2), l.U64Arg(3), l.U64Arg(4), l.I64Arg(5), l.U32Arg(6) != 0
	if rows == 0 || cols == 0 || n%(rows*cols) != 0 {
		return fmt.Errorf("%s: %d elements are not %d×%d matrices", l.Name, n, rows, cols)
	}
	u := uint64(size)
	out, err := simBytes(l, 0, n*u)
	if err != nil {
		return err
	}
	in, err := simBytes(l, 1, n*u)
	if err != nil {
		return err
	}
	for t := range n {
		c, r := int64(t%cols), int64(t/cols%rows)
		if keep := (upper && c-r >= k) || (!upper && c-r <= k); keep {
			copy(out[t*u:(t+1)*u], in[t*u:(t+1)*u])
		} else {
			clear(out[t*u : (t+1)*u])
		}
	}
	return nil
}

// simFill is cudaep_fill_<size>(out, n, bits): the low size bytes of bits, little-endian.
func simFill(l *cudadrv.KernelLaunch, size int) error {
	n, bits := l.U64Arg(1), l.U64Arg(2)
	out, err := simBytes(l, 0, n*uint64(size))
	if err != nil {
		return err
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], bits)
	for i := 0; i < len(out); i += size {
		copy(out[i:i+size], b[:size])
	}
	return nil
}

// simWrite8 is cudaep_write8_b64(out, n, v0, …, v7), launched with one warp.
func simWrite8(l *cudadrv.KernelLaunch) error {
	n := l.U64Arg(1)
	if n > 8 || l.Threads() < n {
		return fmt.Errorf("%s: %d values with %d threads", l.Name, n, l.Threads())
	}
	out, err := l.Int64s(l.PtrArg(0), int(n))
	if err != nil {
		return err
	}
	for i := range out {
		out[i] = l.I64Arg(2 + i)
	}
	return nil
}

// simRange is cudaep_range_<t>(out, n, start, delta): float64 start and delta for the float
// types, int64 for the integer ones.
func simRange(l *cudadrv.KernelLaunch, dt DType) error {
	n := int(l.U64Arg(1))
	out, err := simView(l, l.PtrArg(0), dt, n)
	if err != nil {
		return err
	}
	for i := range int64(n) {
		if isFloat(dt) {
			out.setFloat(i, l.F64Arg(2)+float64(i)*l.F64Arg(3))
		} else {
			out.setInt(i, l.I64Arg(2)+i*l.I64Arg(3))
		}
	}
	return nil
}

// simTranspose is cudaep_transpose_<size>(out, in, dims[6], strides[6], a), launched with
// 32×8-thread blocks: the same element mapping as the strided copy, with the kernel's
// preconditions checked (dimension a, not the last, has input stride 1).
func simTranspose(l *cudadrv.KernelLaunch, dt DType) error {
	if b := l.Block; b.X != 32 || b.Y != 8 || b.Z != 1 {
		return fmt.Errorf("%s: block %v: the kernel needs 32×8 threads", l.Name, b)
	}
	var dims, strides [maxBroadcastDims]int64
	n := int64(1)
	for i := range maxBroadcastDims {
		dims[i], strides[i] = l.I64Arg(2+i), l.I64Arg(8+i)
		if dims[i] < 1 || strides[i] < 0 {
			return fmt.Errorf("%s: dimension %d is %d with stride %d", l.Name, i, dims[i], strides[i])
		}
		n *= dims[i]
	}
	a := int(l.U32Arg(14))
	if a >= maxBroadcastDims-1 || strides[a] != 1 {
		return fmt.Errorf("%s: dimension %d of %v (strides %v) is not an input-contiguous one before the last", l.Name, a, dims, strides)
	}
	out, err := simView(l, l.PtrArg(0), dt, int(n))
	if err != nil {
		return err
	}
	in, err := simView(l, l.PtrArg(1), dt, simExtent(dims, strides))
	if err != nil {
		return err
	}
	simWalk(dims, [][maxBroadcastDims]int64{strides}, func(i int, offs []int64) { out.copyElem(int64(i), in, offs[0]) })
	return nil
}

// simTranspose2D is cudaep_transpose2d_<variant>_<size>(out, in, batch, rows, cols): out[b][c][r]
// = in[b][r][c], with the kernel's preconditions checked: 32×8-thread blocks, a grid whose x
// covers the columns (the kernel does not loop over x), and for the pair variants even rows
// and columns and addresses aligned to two elements.
func simTranspose2D(l *cudadrv.KernelLaunch, dt DType, variant string) error {
	if b := l.Block; b.X != 32 || b.Y != 8 || b.Z != 1 {
		return fmt.Errorf("%s: block %v: the kernel needs 32×8 threads", l.Name, b)
	}
	batch, rows, cols := int64(l.U32Arg(2)), int64(l.U32Arg(3)), int64(l.U32Arg(4))
	width := int64(32)
	if variant == "pair4" || variant == "pair8" {
		width = 64
		unit := uint64(2 * dt.Size())
		if rows%2 != 0 || cols%2 != 0 || uint64(l.PtrArg(0))%unit != 0 || uint64(l.PtrArg(1))%unit != 0 {
			return fmt.Errorf("%s: rows %d and cols %d must be even and the addresses %#x, %#x multiples of %d", l.Name, rows, cols, l.PtrArg(0), l.PtrArg(1), unit)
		}
	}
	g := l.Grid
	if batch < 1 || rows < 1 || cols < 1 || int64(g.X)*width < cols || g.Y < 1 || g.Z < 1 {
		return fmt.Errorf("%s: grid %v for %d × %d × %d", l.Name, g, batch, rows, cols)
	}
	n := int(batch * rows * cols)
	out, err := simView(l, l.PtrArg(0), dt, n)
	if err != nil {
		return err
	}
	in, err := simView(l, l.PtrArg(1), dt, n)
	if err != nil {
		return err
	}
	for b := range batch {
		for r := range rows {
			for c := range cols {
				out.copyElem((b*cols+c)*rows+r, in, (b*rows+r)*cols+c)
			}
		}
	}
	return nil
}
