# SPDX-License-Identifier: BSD-3-Clause
"""What the PyTorch tests share (test_torch_free.py, test_torch_expandable.py,
test_torch_two_devices.py, torch_train.py): the public structs of
include/gdrcache.h as ctypes mirrors, the few constants they use, a get
and put, the counters, and the skip when torch or a GPU is missing.
Imported from the scripts' own folder.
"""
import ctypes
import json
import os


class MrInfo(ctypes.Structure):
    """struct gdrc_mr_info."""
    _fields_ = [("id", ctypes.c_uint64), ("addr", ctypes.c_size_t),
                ("length", ctypes.c_size_t), ("mem_type", ctypes.c_int),
                ("backend", ctypes.c_int), ("device", ctypes.c_int),
                ("access", ctypes.c_uint32), ("lkey", ctypes.c_uint32),
                ("rkey", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("kind", ctypes.c_int), ("buffer_id", ctypes.c_uint64),
                ("key_addr", ctypes.c_size_t),
                ("key_length", ctypes.c_size_t)]


class PtrInfo(ctypes.Structure):
    """struct gdrc_ptr_info."""
    _fields_ = [("mem_type", ctypes.c_int), ("kind", ctypes.c_int),
                ("device", ctypes.c_int), ("flags", ctypes.c_uint32),
                ("buffer_id", ctypes.c_uint64),
                ("alloc_base", ctypes.c_size_t),
                ("alloc_size", ctypes.c_size_t)]


GDRC_OK = 0
GDRC_ERR_UNSUPPORTED = -3
GDRC_PTR_VMM = 4
GDRC_MR_INFO_TAG_CHECKED = 1 << 5
GDRC_DUMP_JSON = 1

SKIPPED = 77  # ctest's SKIP_RETURN_CODE


def load_gdrcache(path):
    """libgdrcache at path, with the argument types of the calls the
    tests make declared (a pointer passed without them is truncated)."""
    lib = ctypes.CDLL(path)
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    lib.gdrc_init.argtypes = [vp, ctypes.POINTER(vp)]
    lib.gdrc_mr_get.argtypes = [vp, vp, sz, ctypes.c_uint32,
                                ctypes.c_uint32, ctypes.POINTER(vp)]
    lib.gdrc_mr_put.argtypes = [vp, vp]
    lib.gdrc_mr_query.argtypes = [vp, ctypes.POINTER(MrInfo)]
    lib.gdrc_ptr_query.argtypes = [vp, vp, ctypes.POINTER(PtrInfo)]
    lib.gdrc_stats_dump.argtypes = [vp, ctypes.c_int, ctypes.c_char_p, sz,
                                    ctypes.POINTER(sz)]
    lib.gdrc_cuda_hooks_status.argtypes = [vp,
                                           ctypes.POINTER(ctypes.c_char_p)]
    lib.gdrc_status_str.argtypes = [ctypes.c_int]
    lib.gdrc_status_str.restype = ctypes.c_char_p
    lib.gdrc_fini.argtypes = [vp]
    return lib


def torch_on_gpu():
    """torch, or None (after saying why) without torch or a GPU."""
    try:
        import torch
    except ImportError:
        print("skipped: no torch")
        return None
    if not torch.cuda.is_available():
        print("skipped: no GPU")
        return None
    return torch


def register(lib, ctx, ptr, length=4096):
    """gdrc_mr_get of [ptr, ptr + length) in ctx, then its put (the
    registration stays cached): what gdrc_mr_query said of it."""
    mr, info = ctypes.c_void_p(), MrInfo()
    st = lib.gdrc_mr_get(ctx, ptr, length, 0, 0, ctypes.byref(mr))
    assert st == 0, lib.gdrc_status_str(st)
    assert lib.gdrc_mr_query(mr, ctypes.byref(info)) == 0
    lib.gdrc_mr_put(ctx, mr)
    return info


def stats(lib, ctx):
    """ctx's counters, as gdrc_stats_dump's JSON says them."""
    buf = ctypes.create_string_buffer(1 << 14)
    assert lib.gdrc_stats_dump(ctx, GDRC_DUMP_JSON, buf, len(buf),
                               None) == 0
    return json.loads(buf.value.decode())


def hooked_context(lib):
    """A gdrc context with GDRC_VALIDATE=hooks (no BUFFER_ID check can
    hide a missed free) whose CUDA free hooks work."""
    os.environ["GDRC_VALIDATE"] = "hooks"
    ctx = ctypes.c_void_p()
    assert lib.gdrc_init(None, ctypes.byref(ctx)) == 0, "gdrc_init"
    why = ctypes.c_char_p()
    st = lib.gdrc_cuda_hooks_status(ctx, ctypes.byref(why))
    print("cuda hooks status", st, why.value)
    assert st == 0, why.value
    return ctx
