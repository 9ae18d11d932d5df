"""User kernels from Python: PTX with typed, checked arguments, captured launches, NVRTC:
mirrors ctests/test_user_kernels.c."""

import array

import cudaep
from cudaep import Arg, Slot

from .support import TestCase, floats, on_sim, provider, read_floats

# cudaep_mul_f32(out, a, b, n): out[i] = a[i] * b[i]. The GPU runs this PTX; the simulator binds
# the built-in entry of the same name and contract.
MUL_PTX = """
.version 7.5
.target sm_75
.address_size 64
.visible .entry cudaep_mul_f32(.param .u64 p_out, .param .u64 p_a, .param .u64 p_b, .param .u64 p_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [p_out];
    ld.param.u64 %rd2, [p_a];
    ld.param.u64 %rd3, [p_b];
    ld.param.u64 %rd4, [p_n];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd5, %r1, %r2;
    cvt.u64.u32 %rd6, %r3;
    add.s64 %rd7, %rd5, %rd6;
    setp.ge.u64 %p1, %rd7, %rd4;
    @%p1 bra DONE;
    shl.b64 %rd8, %rd7, 2;
    cvta.to.global.u64 %rd9, %rd2;
    add.s64 %rd9, %rd9, %rd8;
    ld.global.f32 %f1, [%rd9];
    cvta.to.global.u64 %rd10, %rd3;
    add.s64 %rd10, %rd10, %rd8;
    ld.global.f32 %f2, [%rd10];
    mul.rn.f32 %f3, %f1, %f2;
    cvta.to.global.u64 %rd11, %rd1;
    add.s64 %rd11, %rd11, %rd8;
    st.global.f32 [%rd11], %f3;
DONE:
    ret;
}
"""

ADD_ONE = """
extern "C" __global__ void add_one(float* out, const float* in, unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + 1.0f;
}
"""


class UserKernelTest(TestCase):
    def test_ptx_launch_capture_and_checks(self):
        n = 300
        a, b = floats(n, 51), floats(n, 52)
        with provider() as p:
            mod = p.load_module(MUL_PTX)
            self.assertIn(".entry cudaep_mul_f32(", mod.ptx)
            fn = mod.function("cudaep_mul_f32")
            with self.assertRaises(cudaep.InvalidArgument):
                mod.function("nope")
            ab, bb, out = p.upload(a), p.upload(b), p.alloc(4 * n + 64)
            out.memset(0xA5)
            grid = (n + 127) // 128
            fn.launch(grid, 128, [Arg.memory(out, 64), Arg.memory(ab), Arg.memory(bb), Arg.u64(n)])
            self.assertFloatsNear(read_floats(out, n, 64), [x * y for x, y in zip(a, b)])
            self.assertEqual(out.read(64), b"\xa5" * 64)
            fn.launch((grid, 1, 1), (128, 1), [Arg.ptr(out.device_ptr), Arg.ptr(ab.device_ptr), Arg.memory(bb),
                                               Arg.u64(n)])
            self.assertFloatsNear(read_floats(out, n), [x * y for x, y in zip(a, b)])
            for bad in ([Arg.memory(out), Arg.memory(ab), Arg.memory(bb)],
                        [Arg.memory(out), Arg.memory(ab), Arg.memory(bb), Arg.f32(1.0)],
                        [Arg.memory(out, 4 * n + 65), Arg.memory(ab), Arg.memory(bb), Arg.u64(n)]):
                with self.assertRaises(cudaep.InvalidArgument):
                    fn.launch(grid, 128, bad)
            with self.assertRaises(cudaep.InvalidArgument):
                fn.launch(0, 128, [Arg.memory(out), Arg.memory(ab), Arg.memory(bb), Arg.u64(n)])
            with self.assertRaises(TypeError):
                fn.launch(1, 1, [42])

            with p.capture(Slot.PRIMARY, [], [ab, bb, out]):
                fn.launch(grid, 128, [Arg.memory(out), Arg.memory(ab), Arg.memory(bb), Arg.u64(n)])
            a2 = floats(n, 53)
            ab.write(a2)
            p.replay()
            self.assertFloatsNear(read_floats(out, n), [x * y for x, y in zip(a2, b)])
            p.reset_graph()

            mod.close()  # the function keeps its module
            fn.launch(grid, 128, [Arg.memory(out), Arg.memory(ab), Arg.memory(bb), Arg.u64(n)])
            for o in (fn, ab, bb, out):
                o.close()

    def test_nvrtc(self):
        with provider() as p:
            if on_sim():
                with self.assertRaises(cudaep.Unsupported) as cm:
                    p.compile_module(ADD_ONE, "add_one.cu", ["--std=c++17"])
                self.assertIn("NVRTC", cm.exception.message)
                return
            with p.compile_module(ADD_ONE, "add_one.cu", ["--std=c++17"]) as mod, mod.function("add_one") as fn:
                x = floats(200, 61)
                with p.upload(x) as xb, p.alloc(800) as yb:
                    fn.launch(2, 128, [Arg.memory(yb), Arg.memory(xb), Arg.u64(200)])
                    self.assertFloatsNear(read_floats(yb), [v + 1 for v in x])
            with self.assertRaises(cudaep.CudaError) as cm:
                p.compile_module('extern "C" __global__ void broken( {', "broken.cu")
            self.assertIn("broken.cu", cm.exception.message)

    def test_typed_values_reach_the_kernel_as_written(self):
        # The launch arguments are typed: an f32 is not an integer in disguise.
        arr = array.array("f", [0.0])
        self.assertEqual(Arg.f32(1.5).value, 1.5)
        self.assertEqual(Arg.i32(-3).value, -3)
        self.assertEqual(Arg.memory(arr, 8).value, 8)
