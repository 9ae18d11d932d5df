package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/ep"
)

func runDemo(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDemoReportsTheSimDevice(t *testing.T) {
	code, out, stderr := runDemo(t, "-backend=sim")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"ABI version         1",
		"library version     " + ep.Version,
		"backend             sim\n",
		"device              0: cudaep simulated device",
		"compute capability  9.0",
		"multiprocessors     132",
		"memory              16.0 GiB total, ",
	} {
		assert.Contains(t, out, want)
	}
}

func TestDemoAutoSaysWhy(t *testing.T) {
	code, out, stderr := runDemo(t, "-backend=auto")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "(auto chose ")
}

func TestDemoOptionFlag(t *testing.T) {
	code, out, stderr := runDemo(t, "-backend=sim", "-option", "tf32=true", "-option", "staging_pool_cap_bytes=1MiB")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "backend             sim")
}

func TestDemoRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-backend=gpu"}, "cuda, sim or auto"},
		{[]string{"-device=-1"}, "0..2147483647"},
		{[]string{"-option", "nokey"}, "want key=value"},
		{[]string{"-option", "color=blue"}, "unknown option"},
		{[]string{"-backend=sim", "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := runDemo(t, tt.args...)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

func TestDemoMissingDeviceFailsWithTheCount(t *testing.T) {
	code, _, stderr := runDemo(t, "-backend=sim", "-device=4")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "1 device")
}

func TestDemoCUDAIsRealOrExplains(t *testing.T) {
	code, out, stderr := runDemo(t, "-backend=cuda")
	if code == 0 {
		assert.Contains(t, out, "backend             cuda")
		return
	}
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "backend=sim")
}
