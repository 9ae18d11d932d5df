package kernels_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cudaep/cudaep/ep/kernels"
)

func TestSoftmaxAgainstReference(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		shape []int64
		axis  *int64 // nil: the opset's default
		opset int
		scale float32
	}{
		{[]int64{4, 33}, nil, 13, 1},           // default axis -1, rows kernel
		{[]int64{4, 33}, ptr(-1), 13, 1},       // explicit negative axis
		{[]int64{3, 5, 7}, ptr(1), 13, 1},      // middle axis, columns kernel
		{[]int64{3, 5, 7}, ptr(-2), 13, 1},     // the same axis, negative
		{[]int64{6, 5}, ptr(0), 13, 1},         // leading axis
		{[]int64{2, 3000}, ptr(-1), 13, 1},     // long rows: 1024-thread blocks
		{[]int64{1}, ptr(0), 13, 1},            // one element
		{[]int64{2, 3, 4}, ptr(1), 11, 1},      // opset 11: softmax over the flattened [3,4]
		{[]int64{2, 3, 4}, nil, 11, 1},         // opset 11 default axis 1
		{[]int64{5, 64}, ptr(-1), 13, 60},      // large logits: exp overflows without the max shift
		{[]int64{2, 9, 3, 5}, ptr(-3), 13, 60}, // large logits, strided
	}
	for _, c := range cases {
		axisName := "default"
		if c.axis != nil {
			axisName = fmt.Sprint(*c.axis)
		}
		t.Run(fmt.Sprintf("%v/axis=%s/opset=%d/scale=%g", c.shape, axisName, c.opset, c.scale), func(t *testing.T) {
			f := f.sub(t)
			spec := kernels.Spec{Op: "Softmax", Opset: c.opset, Inputs: []kernels.TensorInfo{f32Info(c.shape...)}}
			axis := int64(-1)
			if c.opset < 13 {
				axis = 1
			}
			if c.axis != nil {
				spec.Attrs = map[string]kernels.Attribute{"axis": kernels.IntAttr(*c.axis)}
				axis = *c.axis
			}
			x := f.random(spec.Inputs[0].NumElements())
			for i := range x {
				x[i] *= c.scale
			}
			k, got := f.runF32(spec, x)
			assert.Equal(t, []kernels.TensorInfo{f32Info(c.shape...)}, k.Outputs())
			requireClose(t, got, kernels.RefSoftmax(to64(x), c.shape, int(axis), c.opset), boundElementwise, k.Name())
		})
	}
}

func ptr(v int64) *int64 { return &v }
