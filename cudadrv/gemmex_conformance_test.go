package cudadrv_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/cudadrv"
	"github.com/cudaep/cudaep/cudadrv/drivertest"
)

// halfType is a 16-bit GemmEx matrix type with its host conversions.
type halfType struct {
	t     cudadrv.BLASDataType
	bits  func(float32) uint16
	value func(uint16) float32
	bound float64 // ‖out − ref‖/‖ref‖ for outputs rounded to the type, float32 accumulation
}

var halfTypes = []halfType{
	{cudadrv.BLASFloat16, cudadrv.Float16Bits, cudadrv.Float16Value, 2e-3},
	{cudadrv.BLASBFloat16, cudadrv.BFloat16Bits, cudadrv.BFloat16Value, 1e-2},
}

// round returns f rounded to the type, as float32 values and as the device's bytes.
func (h halfType) round(f []float32) ([]float32, []byte) {
	vals := make([]float32, len(f))
	raw := make([]byte, 2*len(f))
	for i, v := range f {
		b := h.bits(v)
		vals[i] = h.value(b)
		binary.LittleEndian.PutUint16(raw[2*i:], b)
	}
	return vals, raw
}

func (h halfType) decode(raw []byte) []float32 {
	out := make([]float32, len(raw)/2)
	for i := range out {
		out[i] = h.value(binary.LittleEndian.Uint16(raw[2*i:]))
	}
	return out
}

func uploadBytes(t *testing.T, env *drivertest.Env, b []byte) *cudadrv.DeviceBuffer {
	t.Helper()
	d := alloc(t, env, uint64(len(b)))
	require.NoError(t, env.Context.CopyHtoD(d.Ptr(), b))
	return d
}

func downloadBytes(t *testing.T, env *drivertest.Env, d *cudadrv.DeviceBuffer) []byte {
	t.Helper()
	out := make([]byte, d.Size())
	require.NoError(t, env.Context.CopyDtoH(out, d.Ptr()))
	return out
}

func TestGemmExHalfTypesAgainstFloat64Reference(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	h, err := s.NewBLAS()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Destroy()) }()

	const m, n, k = 37, 29, 41
	for _, ht := range halfTypes {
		for _, ops := range [][2]cudadrv.BLASOp{{cudadrv.OpN, cudadrv.OpN}, {cudadrv.OpT, cudadrv.OpN}, {cudadrv.OpN, cudadrv.OpT}} {
			for _, beta := range []float32{0, 0.5} {
				t.Run(fmt.Sprintf("%s ta=%d tb=%d beta=%v", ht.t, ops[0], ops[1], beta), func(t *testing.T) {
					env.BindHere(t)
					p := &cudadrv.GemmParams{TransA: ops[0], TransB: ops[1], M: m, N: n, K: k, Alpha: 1.5, Beta: beta, LDC: m, Type: ht.t}
					p.LDA, p.LDB = m, k
					if ops[0] == cudadrv.OpT {
						p.LDA = k
					}
					if ops[1] == cudadrv.OpT {
						p.LDB = n
					}
					a, araw := ht.round(drivertest.RandomFloat32(m * k))
					b, braw := ht.round(drivertest.RandomFloat32(k * n))
					c, craw := ht.round(drivertest.RandomFloat32(m * n))
					da, db, dc := uploadBytes(t, env, araw), uploadBytes(t, env, braw), uploadBytes(t, env, craw)
					p.A, p.B, p.C = da.Ptr(), db.Ptr(), dc.Ptr()
					require.NoError(t, h.GemmEx(p))
					require.NoError(t, s.Synchronize())
					got := ht.decode(downloadBytes(t, env, dc))
					assert.Less(t, drivertest.RelErr(got, refGemm(*p, a, b, c)), ht.bound)
				})
			}
		}
		t.Run(fmt.Sprintf("%s strided batched", ht.t), func(t *testing.T) {
			env.BindHere(t)
			const batch = 3
			p := &cudadrv.GemmParams{TransA: cudadrv.OpN, TransB: cudadrv.OpN, M: m, N: n, K: k, Alpha: 1, Beta: 0,
				LDA: m, LDB: k, LDC: m, StrideA: m * k, StrideB: 0, StrideC: m * n, BatchCount: batch, Type: ht.t}
			a, araw := ht.round(drivertest.RandomFloat32(batch * m * k))
			b, braw := ht.round(drivertest.RandomFloat32(k * n)) // stride 0: shared by every batch
			cinit := make([]float32, batch*m*n)
			for i := range cinit {
				cinit[i] = float32(math.NaN()) // beta = 0: never read
			}
			_, craw := ht.round(cinit)
			da, db, dc := uploadBytes(t, env, araw), uploadBytes(t, env, braw), uploadBytes(t, env, craw)
			p.A, p.B, p.C = da.Ptr(), db.Ptr(), dc.Ptr()
			require.NoError(t, h.GemmStridedBatchedEx(p))
			require.NoError(t, s.Synchronize())
			got := ht.decode(downloadBytes(t, env, dc))
			for i := 0; i < batch; i++ {
				one := *p
				ref := refGemm(one, a[i*m*k:(i+1)*m*k], b, make([]float32, m*n))
				assert.Less(t, drivertest.RelErr(got[i*m*n:(i+1)*m*n], ref), ht.bound, "batch %d", i)
			}
		})
	}
}

func TestGemmExRefusesUnknownType(t *testing.T) {
	env := drivertest.Open(t)
	s := newStream(t, env)
	h, err := s.NewBLAS()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Destroy()) }()
	d := alloc(t, env, 64)
	p := &cudadrv.GemmParams{TransA: cudadrv.OpN, TransB: cudadrv.OpN, M: 2, N: 2, K: 2, Alpha: 1,
		A: d.Ptr(), B: d.Ptr(), C: d.Ptr(), LDA: 2, LDB: 2, LDC: 2, Type: cudadrv.BLASDataType(1)}
	var be *cudadrv.BLASError
	require.ErrorAs(t, h.GemmEx(p), &be)
	assert.Equal(t, cudadrv.BLASInvalidValue, be.Status)
	require.NoError(t, s.Synchronize())
}
