#!/usr/bin/env python3
"""gen_misuse.py: generates the misuse test of the C ABI from include/cudaep.h.

    gen_misuse.py --header include/cudaep.h --wrong-state ctests/test_wrong_state.c --out FILE.c

For every function the header declares with CUDAEP_API it emits calls that each pass exactly
one bad argument, the others valid (from fixture.h), and checks the documented status:

  * a handle parameter: zero, released, a live handle of another type, and two forged values
    (the next generation of a live handle, and a number never issued): INVALID_HANDLE or
    STALE_HANDLE;
  * a pointer parameter (by its CUDAEP_IN / _IN_OPT / _OUT / _OUT_OPT / _INOUT annotation):
    NULL, and for a struct with struct_size a size that is too short;
  * a size, offset, count, index or enum parameter: the values that overflow or lie outside
    what it accepts (the tables SCALARS and SCALAR_OVERRIDES below);

and after every failing call that the out-parameters were left exactly as they were. After each
function's cases it checks that the library is still usable and holds no leaked handle. It reads
the header through scripts/cheader.py, the reader the Python bindings and tests share.

Argument errors come before state errors (the header's "Argument errors first"), so every case
that expects an error runs four times: with no capture live, and while a capture is live on the
fixture's provider begun on this thread, on another thread, and on another provider begun on
this thread (the capture window of a capturing thread covers every provider). Each capture
must still end cleanly after the cases (no refused call touched the driver). Cases that
expect success run without a capture only.

The generator refuses to run when the header has something it does not know: a parameter
without a rule (a new scalar name, a pointer without an annotation or without a fixture value),
or a function with no entry in STATES, which maps each function to the cases of
test_wrong_state.c that call it in a forbidding state (or to the reason it has none). So a new
function cannot be added to the header without its misuse cases. CMake runs it at build time.
"""

import argparse
import os
import re
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import cheader  # noqa: E402  the one reader of include/cudaep.h

IA, IH, SH, OK = "CUDAEP_INVALID_ARGUMENT", "CUDAEP_INVALID_HANDLE", "CUDAEP_STALE_HANDLE", "CUDAEP_OK"
DECLINED = "CUDAEP_DECLINED"

# The handle types and the fixture field naming a live (or released) one.
HANDLES = {
    "CudaEpOptions": "options", "CudaEpProvider": "provider", "CudaEpBuffer": "buffer",
    "CudaEpKernel": "kernel", "CudaEpModule": "module", "CudaEpFunction": "function",
    "CudaEpLazyWeight": "lazy_weight", "CudaEpPagedWeight": "paged_weight",
    "CudaEpDoubleBuffer": "double_buffer", "CudaEpTicket": "ticket",
}

# Functions not tested here, with the reason.
EXEMPT = {
    "CudaEpCreateStatus": "plain C, takes no handle and never fails; test_status.c covers NULL and unknown codes",
    "CudaEpGetErrorCode": "plain C, defined for NULL; test_status.c covers it",
    "CudaEpGetErrorMessage": "plain C, defined for NULL; test_status.c covers it",
    "CudaEpReleaseStatus": "plain C, NULL is a no-op; test_status.c covers it",
    "CudaEpGetErrorCodeName": "plain C, defined for every number; test_status.c covers it",
}

# Scalar parameters: the bad values each must refuse, as (C expression, expected status). An
# empty list means every value is valid, which the reason after it explains.
UNCONSTRAINED = []
SCALARS = {
    "size": [("UINT64_MAX", IA)],
    "alignment": [("3", IA), ("UINT64_MAX", IA)],
    "offset": [("UINT64_MAX", IA)],
    "dst_offset": [("UINT64_MAX", IA)],
    "src_offset": [("UINT64_MAX", IA)],
    "num_inputs": [("SIZE_MAX", IA)],
    "num_outputs": [("SIZE_MAX", IA)],
    "num_attributes": [("SIZE_MAX", IA)],
    "num_options": [("SIZE_MAX", IA)],
    "num_kernels": [("SIZE_MAX", IA)],
    "num_retain": [("SIZE_MAX", IA)],
    "num_args": [("SIZE_MAX", IA), ("CUDAEP_MAX_KERNEL_ARGS + 1", IA)],
    "ptx_size": [("0", IA), ("SIZE_MAX", IA)],
    "index": [("SIZE_MAX", IA)],
    "opset": [("0", IA), ("-1", IA)],
    "slot_kind": [("0", IA), ("99", IA)],
    "slot_key": [("7", IA)],  # with the valid kind, PRIMARY, whose key must be 0
    "slot_bytes": [("0", IA), ("UINT64_MAX", DECLINED)],
    "mode": [("-1", IA), ("99", IA)],
    "slot": [("2", IA), ("UINT32_MAX", IA)],
    "buf_size": UNCONSTRAINED,        # a capacity: any size the caller's buffer has is valid
    "shape_capacity": UNCONSTRAINED,  # a capacity, likewise
    "layer": UNCONSTRAINED,           # a host-chosen id: every value names a layer
    "value": UNCONSTRAINED,           # a memset byte
    "mapping": [("0", IA), ("UINT64_MAX", IA)],  # ids start at 1 and are never that large
}
SCALAR_OVERRIDES = {
    ("CudaEpAllocBuffer", "size"): [("0", IA), ("UINT64_MAX / 2", IA)],
}

# Valid values of scalar parameters: by (function, name), then by name.
SCALAR_VALID = {
    ("CudaEpAllocBuffer", "size"): "4096",
    ("CudaEpGetKernel", "opset"): "20",
    ("CudaEpLoadModule", "ptx_size"): "fx->ptx_size",
    ("CudaEpLaunchFunction", "num_args"): "4",
    ("CudaEpCreateDoubleBuffer", "slot_bytes"): "4096",
    "size": "64", "alignment": "0", "offset": "0", "dst_offset": "0", "src_offset": "0",
    "value": "0x11", "num_inputs": "1", "num_outputs": "1", "num_attributes": "1",
    "num_options": "1", "num_kernels": "1", "num_retain": "1", "index": "0",
    "slot_kind": "CUDAEP_SLOT_PRIMARY", "slot_key": "0", "layer": "1",
    "mode": "CUDAEP_TRANSFER_STAGING", "slot": "0", "buf_size": "sizeof s_buf", "shape_capacity": "8",
    "mapping": "fx->region.mapping",
}

# Valid values of handle parameters other than the fixture's live one of their type.
HANDLE_VALID = {
    ("CudaEpCopyBuffer", "src"): "fx->buffer2",
    ("CudaEpCopyPeer", "src"): "fx->buffer2",
    ("CudaEpKernelNonZeroCount", "kernel"): "fx->nonzero",
}

# Valid values of input pointers: by (function, name), then by name.
POINTER_VALID = {
    ("CudaEpSetOption", "key"): '"tf32"',
    ("CudaEpGetOption", "key"): '"backend"',
    ("CudaEpSetOption", "value"): '"false"',
    ("CudaEpGetKernel", "inputs"): "fx->gelu_info",
    ("CudaEpKernelExecute", "inputs"): "fx->relu_in",
    ("CudaEpCopyToDevice", "src"): "fx->host_bytes",
    ("CudaEpCompileModule", "options"): "fx->nvrtc_options",
    "op": '"Gelu"', "outputs": "fx->relu_out", "attributes": "fx->gelu_attr",
    "count": "&fx->nz_count", "path": "fx->data_path", "source": "fx->cuda_source",
    "program_name": '"k.cu"', "name": "fx->entry", "ptx": "fx->ptx", "config": "&fx->launch_config",
    "args": "fx->launch_args", "kernels": "fx->capture_kernels", "retain": "fx->capture_retain",
    "spec": "&fx->weight_spec",
}

# What NULL for a CUDAEP_OUT_OPT parameter returns with the other arguments valid.
OUT_OPT_NULL = {
    "buf": IA,             # a NULL buffer with a nonzero buf_size
    "shape": IA,           # likewise with shape_capacity
    "out_had_graph": OK,   # documented optional
    "out_abi_version": OK,
    "out_library_version": OK,
    "out_recovered": OK,   # documented optional
    "out_path": OK,        # documented optional
}

# The wrong-state cases of test_wrong_state.c (state_NAME) that exercise each function, or
# the reason it has none.
STATELESS = "no state forbids it: it reads a property fixed at creation or a snapshot of counters"
STATES = {
    "CudaEpGetVersion": "always succeeds",
    "CudaEpGetLiveHandleCount": "always succeeds",
    "CudaEpGetOrtStats": "reads process-wide counters: no provider state can forbid it",
    "CudaEpCreateOptions": "creates from nothing",
    "CudaEpSetOption": "options have no state but their values; test_options.c covers bad values",
    "CudaEpGetOption": STATELESS,
    "CudaEpReleaseOptions": ["release_twice"],
    "CudaEpCreateProvider": "test_provider.c covers backend=cuda without a driver and a device out of range",
    "CudaEpReleaseProvider": ["release_twice", "execute_with_provider_handle_released", "release_during_capture",
                              "last_child_released_during_capture", "release_other_provider_on_capturing_thread",
                              "cancel_not_pending_during_capture"],
    "CudaEpProviderGetBackendName": STATELESS,
    "CudaEpProviderGetAutoReason": STATELESS,
    "CudaEpProviderGetDeviceName": STATELESS,
    "CudaEpProviderGetDeviceInfo": STATELESS,
    "CudaEpProviderGetStats": STATELESS,
    "CudaEpSynchronize": ["drain_during_capture"],
    "CudaEpForceSynchronize": ["end_after_refused_drain", "other_thread_work_during_capture",
                               "other_provider_on_capturing_thread"],
    "CudaEpSynchronizeCompute": ["host_copy_during_capture", "other_provider_on_capturing_thread"],
    "CudaEpDrainForUnmap": ["drain_during_capture"],
    "CudaEpAllocBuffer": ["execute_with_provider_handle_released", "driver_work_on_capturing_thread",
                          "other_provider_on_capturing_thread"],
    "CudaEpReleaseBuffer": ["release_twice", "release_during_capture", "release_other_provider_on_capturing_thread",
                            "cancel_not_pending_during_capture"],
    "CudaEpBufferGetSize": STATELESS,
    "CudaEpBufferGetDevicePointer": STATELESS,
    "CudaEpCopyToDevice": ["host_copy_during_capture", "other_thread_work_during_capture",
                           "other_provider_on_capturing_thread"],
    "CudaEpCopyToHost": ["host_copy_during_capture", "other_provider_on_capturing_thread"],
    "CudaEpCopyBuffer": ["other_thread_work_during_capture"],
    "CudaEpMemset": ["host_copy_during_capture", "other_thread_work_during_capture", "other_provider_on_capturing_thread"],
    "CudaEpGetKernel": ["driver_work_on_capturing_thread", "other_provider_on_capturing_thread"],
    "CudaEpReleaseKernel": ["release_twice"],
    "CudaEpKernelGetName": STATELESS,
    "CudaEpKernelGetCaptureSupport": STATELESS,
    "CudaEpKernelGetCaptureReason": STATELESS,
    "CudaEpKernelGetOutputCount": STATELESS,
    "CudaEpKernelGetOutputInfo": STATELESS,
    "CudaEpKernelExecute": ["execute_ticket_not_waited", "execute_with_provider_handle_released", "other_provider_on_capturing_thread",
                            "other_thread_work_during_capture", "misaligned_tensor"],
    "CudaEpKernelNonZeroCount": ["nonzero_count_during_capture", "nonzero_count_on_other_kernel"],
    "CudaEpCompileModule": ["compile_module"],
    "CudaEpLoadModule": "pure validation of the PTX; test_user_kernels.c covers refused images",
    "CudaEpReleaseModule": ["release_twice", "module_released_before_function"],
    "CudaEpModuleGetPTX": ["module_released_before_function"],
    "CudaEpModuleGetFunction": ["module_released_before_function"],
    "CudaEpReleaseFunction": ["release_twice"],
    "CudaEpLaunchFunction": ["module_released_before_function"],
    "CudaEpBeginCapture": ["begin_during_capture", "begin_rejected_by_audit", "other_provider_on_capturing_thread"],
    "CudaEpRecapture": ["recapture_during_capture", "begin_rejected_by_audit"],
    "CudaEpEndCapture": ["end_without_begin", "end_on_another_thread", "end_after_refused_drain"],
    "CudaEpAbortCapture": ["abort_without_begin", "abort_on_another_thread"],
    "CudaEpReplay": ["replay_nothing_captured", "replay_during_capture", "replay_after_reset"],
    "CudaEpReplaySegment": ["replay_segment_nothing_captured", "replay_segment_past_segments"],
    "CudaEpResetGraph": ["reset_during_capture", "reset_nothing_captured", "reset_during_other_capture"],
    "CudaEpHasExecutable": ["end_after_refused_drain"],
    "CudaEpGetSegmentCount": STATELESS,
    "CudaEpGetCaptureStatus": ["end_on_another_thread"],
    "CudaEpGetGraphStats": STATELESS,
    "CudaEpOpenExternalData": "test_paging.c covers missing files and bad regions",
    "CudaEpCreateLazyWeight": "pure validation of the spec; test_paging.c covers bad ones",
    "CudaEpReleaseLazyWeight": ["release_twice"],
    "CudaEpLazyWeightGetSize": STATELESS,
    "CudaEpPrefetchWeight": ["prefetch_disabled_declines", "prefetch_busy_declines"],
    "CudaEpPageWeight": ["page_not_prefetched", "page_twice"],
    "CudaEpPagedWeightGetPointer": ["release_paged_twice"],
    "CudaEpPagedWeightGetSize": STATELESS,
    "CudaEpReleasePagedWeight": ["release_paged_twice", "release_twice"],
    "CudaEpCancelWeight": ["cancel_not_pending", "page_twice", "cancel_not_pending_during_capture"],
    "CudaEpGetResidencyStats": STATELESS,
    "CudaEpCreateDoubleBuffer": ["db_create_declined", "driver_work_on_capturing_thread", "db_create_small_cap",
                                 "close_external_data_during_capture", "other_provider_on_capturing_thread"],
    "CudaEpReleaseDoubleBuffer": ["release_twice", "release_during_capture"],
    "CudaEpDoubleBufferGetCapacity": STATELESS,
    "CudaEpDoubleBufferGetSlotState": ["db_cancel_during_capture", "other_provider_db_on_capturing_thread"],
    "CudaEpDoubleBufferGetMetrics": STATELESS,
    "CudaEpDoubleBufferPrefetch": ["db_prefetch_both_busy", "other_provider_db_on_capturing_thread"],
    "CudaEpDoubleBufferWaitLayer": ["db_wait_after_release", "db_wait_stale", "other_provider_db_on_capturing_thread"],
    "CudaEpDoubleBufferReleaseLayer": ["db_release_not_waited", "db_release_twice",
                                       "other_provider_db_on_capturing_thread"],
    "CudaEpDoubleBufferCancelLayer": ["db_cancel_after_release", "db_release_not_waited", "db_cancel_during_capture"],
    "CudaEpTicketGetInfo": ["db_wait_stale"],
    "CudaEpReleaseTicket": ["release_twice"],
    "CudaEpRemoveGraph": ["remove_graph"],
    "CudaEpCloseExternalData": ["close_external_data", "close_external_data_during_capture"],
    "CudaEpRecoverWeights": ["recover_during_capture"],
    "CudaEpDoubleBufferRecover": ["recover_during_capture"],
    "CudaEpGetWeightFallback": "a query: answered in every state",
    "CudaEpDoubleBufferGetFallback": "a query: answered in every state",
    "CudaEpCopyPeer": ["copy_peer_during_capture"],
}


class GenError(Exception):
    pass


class Param:
    """A parameter as the generator uses it: cheader's, checked against the annotation rules."""

    def __init__(self, func, p):
        self.annotation, self.name, self.type = p.annotation, p.name, p.type
        self.pointer = p.pointer
        if self.pointer and self.annotation is None:
            raise GenError(f"{func}: pointer parameter {self.name} has no CUDAEP_IN/OUT annotation")
        if not self.pointer and self.annotation is not None:
            raise GenError(f"{func}: {self.annotation} on the non-pointer parameter {self.name}")
        self._p = p

    @property
    def pointee(self):
        return self._p.pointee


class Function:
    def __init__(self, fn):
        self.name = fn.name
        self.returns_status = fn.returns_status
        self.params = [Param(fn.name, p) for p in fn.params]


def parse_header(text):
    try:
        header = cheader.parse(text)
    except cheader.HeaderError as e:
        raise GenError(f"include/cudaep.h: {e}") from e
    if not header.functions:
        raise GenError("no CUDAEP_API declarations found")
    unknown = sorted(header.handles - set(HANDLES))
    if unknown:
        raise GenError(f"handle types without a fixture field in HANDLES: {', '.join(unknown)}")
    return [Function(f) for f in header.functions]


class Emitter:
    def __init__(self):
        self.lines = []
        self.cases = 0

    def out(self, line=""):
        self.lines.append(line)


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def storage(fn, p):
    """Declares the storage an out or in/out pointer parameter points at; returns
    (declarations, argument expression, storage name, has struct_size)."""
    var = f"s_{p.name}"
    pointee = p.pointee
    if pointee == "char":
        return [f"char {var}[256];", f"memset({var}, 0xA5, sizeof {var});"], var, var, False
    if pointee == "void":
        return [f"unsigned char {var}[64];", f"memset({var}, 0xA5, sizeof {var});"], var, var, False
    if p.name == "shape":
        return [f"int64_t {var}[8];", f"memset({var}, 0xA5, sizeof {var});"], var, var, False
    decl = [f"{pointee} {var};", f"memset(&{var}, 0xA5, sizeof {var});"]
    struct = p.annotation == "CUDAEP_INOUT"
    if struct:
        decl.append(f"{var}.struct_size = (uint32_t)sizeof {var};")
    return decl, f"&{var}", var, struct


def valid_scalar(fn, p):
    if p.type in HANDLES:
        return HANDLE_VALID.get((fn.name, p.name), f"fx->live.{HANDLES[p.type]}")
    v = SCALAR_VALID.get((fn.name, p.name), SCALAR_VALID.get(p.name))
    if v is None:
        raise GenError(f"{fn.name}: no valid value for the scalar parameter {p.name}: add it to SCALAR_VALID")
    return v


def scalar_cases(fn, p):
    if p.type in HANDLES:
        kind = HANDLES[p.type]
        live = valid_scalar(fn, p)
        wrong = "fx->live.provider" if kind == "options" else "fx->live.options"
        return [
            ("0", IH, f"{p.name} = the null handle"),
            (f"fx->released.{kind}", SH, f"{p.name} = a released handle"),
            (wrong, IH, f"{p.name} = a handle of another type"),
            (f"({live} + ((uint64_t)1 << 32))", IH, f"{p.name} = a forged handle (a generation never issued)"),
            ("(uint64_t)0xDEADBEEFDEADBEEFull", IH, f"{p.name} = a forged handle (a number never issued)"),
        ]
    if (fn.name, p.name) in SCALAR_OVERRIDES:
        bad = SCALAR_OVERRIDES[(fn.name, p.name)]
    elif p.name in SCALARS:
        bad = SCALARS[p.name]
    else:
        raise GenError(f"{fn.name}: no misuse rule for the scalar parameter {p.name} ({p.type}): add it to SCALARS")
    return [(expr, code, f"{p.name} = {expr}") for expr, code in bad]


def pointer_valid(fn, p):
    v = POINTER_VALID.get((fn.name, p.name), POINTER_VALID.get(p.name))
    if v is None:
        raise GenError(f"{fn.name}: no fixture value for the input pointer {p.name}: add it to POINTER_VALID")
    return v


def emit_function(em, fn):
    em.out(f"/* {fn.name} */")
    em.out(f"static void misuse_{fn.name}(int window) {{")
    out_params = [p for p in fn.params if p.pointer and p.annotation in ("CUDAEP_OUT", "CUDAEP_OUT_OPT", "CUDAEP_INOUT")]

    # Every case: (index of the bad parameter, bad expression, expected code, description,
    # short struct_size instead of a value).
    cases = []
    for i, p in enumerate(fn.params):
        if not p.pointer:
            for expr, code, desc in scalar_cases(fn, p):
                cases.append((i, expr, code, desc, False))
            continue
        if p.annotation in ("CUDAEP_IN", "CUDAEP_OUT", "CUDAEP_INOUT"):
            cases.append((i, "NULL", IA, f"{p.name} = NULL", False))
        elif p.annotation == "CUDAEP_IN_OPT":
            cases.append((i, "NULL", IA, f"{p.name} = NULL with a nonzero count", False))
        elif p.annotation == "CUDAEP_OUT_OPT":
            if p.name not in OUT_OPT_NULL:
                raise GenError(f"{fn.name}: what NULL for the optional {p.name} returns is not in OUT_OPT_NULL")
            cases.append((i, "NULL", OUT_OPT_NULL[p.name], f"{p.name} = NULL (optional)", False))
        if p.annotation == "CUDAEP_INOUT":
            cases.append((i, None, IA, f"{p.name}->struct_size too short", True))

    for bad_index, bad_expr, code, desc, short in cases:
        em.cases += 1
        # A call that succeeds would do its work (or be refused) during a capture: only the
        # error cases run in every window.
        guard = "if (window == WINDOW_NONE) " if code == OK else ""
        em.out(f"    {guard}{{ /* {desc}: {code} */")
        args, snaps = [], []
        for i, p in enumerate(fn.params):
            if p.pointer and p.annotation in ("CUDAEP_OUT", "CUDAEP_OUT_OPT", "CUDAEP_INOUT"):
                decl, arg, var, _ = storage(fn, p)
                for d in decl:
                    em.out(f"        {d}")
                if short and i == bad_index:
                    em.out(f"        {var}.struct_size = 1;")
                snaps.append(var)
            elif p.pointer:
                arg = pointer_valid(fn, p)
            else:
                arg = valid_scalar(fn, p)
            args.append(bad_expr if (i == bad_index and bad_expr is not None) else arg)
        for var in snaps:
            em.out(f"        unsigned char snap_{var}[sizeof {var}];")
            em.out(f"        memcpy(snap_{var}, &{var}, sizeof {var});")
        call = f"{fn.name}({', '.join(args)})"
        em.out(f"        CudaEpStatus* st = {call};")
        em.out(f"        expect_status(st, {code}, {c_string(fn.name)}, {c_string(desc)}, window);")
        if code != OK:
            for var in snaps:
                em.out(f"        if (memcmp(snap_{var}, &{var}, sizeof {var}) != 0)")
                em.out(f"            check_fail(__FILE__, __LINE__, \"%s (%s): %s was written on failure\", "
                       f"{c_string(fn.name)}, {c_string(desc)}, {c_string(var[2:])});")
        em.out("    }")
    em.out("}")
    em.out()
    return len(cases)


def check_states(funcs, wrong_state_text):
    defined = set(re.findall(r"^static void state_(\w+)\(void\)", wrong_state_text, flags=re.M))
    names = {f.name for f in funcs}
    for f in funcs:
        if f.name in EXEMPT:
            continue
        entry = STATES.get(f.name)
        if entry is None:
            raise GenError(f"{f.name}: no entry in STATES: list the test_wrong_state.c cases that call it in a "
                           "forbidding state, or say why it has none")
        if isinstance(entry, list):
            for case in entry:
                if case not in defined:
                    raise GenError(f"{f.name}: STATES names state_{case}, which test_wrong_state.c does not define")
                if not re.search(rf"\b{f.name}\(", wrong_state_text):
                    raise GenError(f"{f.name}: test_wrong_state.c never calls it")
    stale = sorted(set(STATES) - names)
    if stale:
        raise GenError(f"STATES lists functions the header does not declare: {', '.join(stale)}")
    return sum(len(v) for v in STATES.values() if isinstance(v, list))


PRELUDE = """\
/* Code generated by ctests/misuse/gen_misuse.py from include/cudaep.h; DO NOT EDIT.
 * Regenerated by the CMake build of ctests/ whenever the header or the generator changes.
 *
 * The misuse test: every exported function, called with one bad argument at a time, returns
 * its documented status, leaves its out-parameters untouched, and leaves the library usable.
 */
#include "fixture.c"

static fixture the_fixture;
static fixture* fx = &the_fixture;

/* expect_status checks a call's status against want and frees it. */
static void expect_status(CudaEpStatus* st, CudaEpErrorCode want, const char* fn, const char* what, int window) {
    CudaEpErrorCode got = CudaEpGetErrorCode(st);
    if (got != want) {
        check_fail(__FILE__, __LINE__, "%s (%s) with %s returned %s (%s), want %s", fn, what, window_names[window],
                   CudaEpGetErrorCodeName(got), CudaEpGetErrorMessage(st), CudaEpGetErrorCodeName(want));
    }
    CudaEpReleaseStatus(st);
}

/* window_open begins the capture of a window (see fixture.h) before fn's cases; 0 if it cannot. */
static int window_open(int window, const char* fn) {
    if (fixture_window_open(fx, window)) return 1;
    check_fail(__FILE__, __LINE__, "before %s: cannot begin %s", fn, window_names[window]);
    return 0;
}

/* window_close ends the window's capture after fn's cases: it must end cleanly, since no refused
 * call may have touched the driver (on the capturing thread that would invalidate it). */
static void window_close(int window, const char* fn) {
    if (!fixture_window_close(fx, window)) {
        check_fail(__FILE__, __LINE__, "after %s during %s: the capture did not end cleanly", fn, window_names[window]);
    }
}

/* still_usable checks, after a function's cases, that the library works and leaked nothing. */
static void still_usable(const char* fn) {
    uint64_t live = 0;
    if (CHECK_OK(CudaEpGetLiveHandleCount(&live)) && live != fx->live_handles) {
        check_fail(__FILE__, __LINE__, "after %s: %llu live handles, want %llu", fn, (unsigned long long)live,
                   (unsigned long long)fx->live_handles);
    }
    char name[16];
    size_t needed = 0;
    CHECK_OK(CudaEpProviderGetBackendName(fx->live.provider, name, sizeof name, &needed));
    int32_t status = -1;
    CHECK_OK(CudaEpGetCaptureStatus(fx->live.provider, &status));
    if (status != CUDAEP_CAPTURE_NONE) check_fail(__FILE__, __LINE__, "after %s: the stream is capturing", fn);
}

"""


def generate(header_text, wrong_state_text):
    funcs = parse_header(header_text)
    state_cases = check_states(funcs, wrong_state_text)
    em = Emitter()
    em.out(PRELUDE)
    tested = []
    for f in funcs:
        if f.name in EXEMPT:
            continue
        if not f.returns_status:
            raise GenError(f"{f.name}: does not return CudaEpStatus* and is not in EXEMPT")
        emit_function(em, f)
        tested.append(f.name)
    em.out("static const struct {")
    em.out("    const char* name;")
    em.out("    void (*cases)(int window);")
    em.out("} functions[] = {")
    for name in tested:
        em.out(f"    {{{c_string(name)}, misuse_{name}}},")
    em.out("};")
    em.out()
    em.out("int main(void) {")
    em.out("    if (!fixture_setup(fx)) return check_result(\"test_misuse\");")
    em.out("    for (int window = 0; window < WINDOWS; window++) {")
    em.out("        for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {")
    em.out("            if (!window_open(window, functions[i].name)) break;")
    em.out("            functions[i].cases(window);")
    em.out("            window_close(window, functions[i].name);")
    em.out("            still_usable(functions[i].name);")
    em.out("        }")
    em.out("    }")
    em.out("    fixture_teardown(fx);")
    em.out("    check_no_live_handles();")
    em.out(f'    printf("misuse: {em.cases} cases over {len(tested)} functions ({len(EXEMPT)} status functions '
           f'exempt), the error cases in %d capture states; {state_cases} wrong-state references checked\\n", WINDOWS);')
    em.out('    return check_result("test_misuse");')
    em.out("}")
    return "\n".join(em.lines) + "\n", em.cases, len(tested)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--header", required=True)
    ap.add_argument("--wrong-state", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    try:
        with open(a.header, encoding="utf-8") as f:
            header = f.read()
        with open(a.wrong_state, encoding="utf-8") as f:
            wrong = f.read()
        text, cases, funcs = generate(header, wrong)
    except GenError as e:
        print(f"gen_misuse.py: {e}", file=sys.stderr)
        return 1
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"gen_misuse.py: {cases} misuse cases over {funcs} functions -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
