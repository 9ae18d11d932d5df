"""DLPack export of device buffers. On the simulator the export refuses clearly (the memory is
not addressable by other libraries). The capsule mechanics are tested on host memory through
the exporter itself; the zero-copy hand-off to PyTorch runs when torch with CUDA is available
and the tests run on backend=cuda (on the GPU machine)."""

import ctypes
import gc
import unittest

import cudaep
from cudaep import dlpack
from cudaep.dtypes import DType

from .support import TestCase, floats, on_sim, provider, read_floats

try:
    import torch
except ImportError:  # torch is optional
    torch = None


# A consumer's view of the capsule API (private prototypes, as the exporter's are).
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", ctypes.pythonapi))
_USED = b"used_dltensor"  # the capsule keeps the name's pointer: it must outlive it


class CapsuleTest(TestCase):
    def consume(self, capsule):
        """Reads a "dltensor" capsule as a consumer would, renaming it used_dltensor."""
        address = _get_pointer(capsule, b"dltensor")
        self.assertEqual(_set_name(capsule, _USED), 0)
        return ctypes.cast(address, ctypes.POINTER(dlpack.DLManagedTensor))

    def test_export_layout_and_deleter(self):
        host = (ctypes.c_float * 6)(*range(1, 7))

        class Owner:
            pass

        owner = Owner()
        before = dlpack.live_exports()
        capsule = dlpack.export(owner, (dlpack.KDL_CPU, 0), ctypes.addressof(host), DType.FLOAT32, (2, 3))
        self.assertEqual(dlpack.live_exports(), before + 1)
        managed = self.consume(capsule)
        t = managed.contents.dl_tensor
        self.assertEqual((t.device.device_type, t.device.device_id), (dlpack.KDL_CPU, 0))
        self.assertEqual((t.ndim, t.shape[0], t.shape[1]), (2, 2, 3))
        self.assertEqual((t.dtype.code, t.dtype.bits, t.dtype.lanes), (2, 32, 1))
        self.assertFalse(t.strides)
        self.assertEqual(t.data, ctypes.addressof(host))
        del capsule
        gc.collect()
        self.assertEqual(dlpack.live_exports(), before + 1, "a consumed capsule waits for the deleter")
        managed.contents.deleter(managed)
        self.assertEqual(dlpack.live_exports(), before)

    def test_unconsumed_capsule_frees_its_export(self):
        host = (ctypes.c_uint8 * 4)()
        before = dlpack.live_exports()
        capsule = dlpack.export(object(), (dlpack.KDL_CPU, 0), ctypes.addressof(host), DType.UINT8, (4,))
        self.assertEqual(dlpack.live_exports(), before + 1)
        del capsule
        gc.collect()
        self.assertEqual(dlpack.live_exports(), before)

    def test_types_without_a_dlpack_code_are_refused(self):
        with self.assertRaises(cudaep.DLPackUnsupported):
            dlpack.export(object(), (dlpack.KDL_CPU, 0), 0, DType.INT4, (2,))


@unittest.skipUnless(on_sim(), "checks the simulator's refusal")
class SimulatorRefusalTest(TestCase):
    def test_sim_buffers_refuse_dlpack_clearly(self):
        with provider() as p, p.alloc(64) as b:
            for call in (b.__dlpack_device__, b.__dlpack__, b.view("float32", (16,)).__dlpack__):
                with self.subTest(call=call.__qualname__), self.assertRaises(cudaep.DLPackUnsupported) as cm:
                    call()
                self.assertIsInstance(cm.exception, BufferError)
                self.assertIn("backend=cuda", cm.exception.message)


def torch_cuda_reason():
    if on_sim():
        return "DLPack export needs CUDAEP_TEST_BACKEND=cuda"
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch has no CUDA device"
    return None


@unittest.skipIf(torch_cuda_reason(), torch_cuda_reason() or "")
class TorchTest(TestCase):
    def test_torch_reads_and_writes_a_device_buffer_without_a_copy(self):
        x = floats(64, 7)
        with provider() as p, p.upload(x) as b:
            self.assertEqual(b.__dlpack_device__(), (dlpack.KDL_CUDA, p.device_ordinal))
            t = torch.from_dlpack(b.view("float32", (8, 8)))
            self.assertEqual(t.device.type, "cuda")
            self.assertEqual(t.data_ptr(), b.device_ptr, "no copy: torch reads the buffer's memory")
            self.assertEqual(tuple(t.shape), (8, 8))
            self.assertEqual(t.flatten().tolist(), list(x))
            t.mul_(2)  # written through torch, read back through cudaep
            torch.cuda.synchronize()
            self.assertEqual(list(read_floats(b)), [2 * v for v in x])
            whole = torch.from_dlpack(b)
            self.assertEqual((whole.dtype, whole.numel()), (torch.uint8, 256))
            del t, whole
            gc.collect()
        self.assertEqual(dlpack.live_exports(), 0)
