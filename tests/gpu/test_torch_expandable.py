#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch expandable segments: VMM pieces unmapped and mapped again.

With PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True the caching
allocator reserves a VA range of all the GPU's memory and maps 20 MiB
pieces into it, one cuMemCreate handle each (docs/probes/
torch_expandable-h100-2026-11-25.txt).  A first tensor keeps the first
piece mapped; a second one makes the allocator map more.  This registers
(ctypes) a range of the second tensor spanning two whole pieces and a
range inside the first, drops the second tensor and empties PyTorch's
cache (which unmaps its pieces but keeps the first), allocates until the
same addresses are mapped again, and checks in each mode (GDRC_VALIDATE
always, auto, hooks with the CUDA hooks on; always with GDRC_MEM_HOOKS=
none, BUFFER_IDs alone), one gdrc context each:
  - the registration over the remapped pieces is never served again:
    the same range gets a new id (and the new mappings' BUFFER_ID);
  - while the pieces are unmapped, a get over them is refused
    (GDRC_ERR_UNSUPPORTED; asked in a context of its own);
  - the registration inside the live first tensor is still served (same
    id) after empty_cache and after the reallocation.

Usage: test_torch_expandable.py path/to/libgdrcache.so
Exit 0 on success, 77 when torch, a GPU or expandable segments are
missing, 1 on failure.
"""
import os

# Before torch is imported: the allocator reads it once.
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import ctypes  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

from gdrc_ctypes import (GDRC_DUMP_JSON, GDRC_ERR_UNSUPPORTED,  # noqa: E402
                         GDRC_OK, GDRC_PTR_VMM, SKIPPED, MrInfo, PtrInfo,
                         load_gdrcache, torch_on_gpu)

MIB = 1 << 20
FIRST_SIZE = 8 * MIB     # inside the first 20 MiB piece
SECOND_SIZE = 120 * MIB  # maps several more pieces
REALLOC_TRIES = 16
LIVE_LEN = 64 * 1024

# (GDRC_VALIDATE, GDRC_MEM_HOOKS)
MODES = [("always", "auto"), ("auto", "auto"), ("hooks", "auto"),
         ("always", "none")]

# Knobs the result depends on: not taken from the caller's environment.
KNOBS = ["GDRC_VALIDATE", "GDRC_MEM_HOOKS", "GDRC_WHOLE_ALLOC_MAX",
         "GDRC_BACKEND", "GDRC_CUDA_LIBRARY", "GDRC_MAX_REGIONS",
         "GDRC_MAX_BYTES"]


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)




class Ctx:
    """One gdrc context, made with the given knobs set for gdrc_init."""

    def __init__(self, lib, validate=None, hooks=None):
        self.lib = lib
        self.name = "%s/%s" % (validate, hooks)
        self.validate, self.hooks = validate, hooks
        env = {"GDRC_VALIDATE": validate, "GDRC_MEM_HOOKS": hooks}
        for k, v in env.items():
            if v is not None:
                os.environ[k] = v
        self.ctx = ctypes.c_void_p()
        st = lib.gdrc_init(None, ctypes.byref(self.ctx))
        for k in env:
            os.environ.pop(k, None)
        check(st == GDRC_OK, "gdrc_init (%s): %s" % (self.name,
                                                     self.status(st)))
        if hooks == "auto":
            why = ctypes.c_char_p()
            st = lib.gdrc_cuda_hooks_status(self.ctx, ctypes.byref(why))
            check(st == GDRC_OK, "%s: cuda hooks not working: %s" %
                  (self.name, why.value))

    def status(self, st):
        return "%d (%s)" % (st, self.lib.gdrc_status_str(st).decode())

    def get(self, addr, length):
        """(status, MrInfo or None); the reference is dropped again."""
        mr, info = ctypes.c_void_p(), MrInfo()
        st = self.lib.gdrc_mr_get(self.ctx, addr, length, 0, 0,
                                  ctypes.byref(mr))
        if st != GDRC_OK:
            return st, None
        check(self.lib.gdrc_mr_query(mr, ctypes.byref(info)) == GDRC_OK,
              "gdrc_mr_query")
        self.lib.gdrc_mr_put(self.ctx, mr)
        return st, info

    def must_get(self, addr, length, what):
        st, info = self.get(addr, length)
        check(st == GDRC_OK, "%s: gdrc_mr_get(%#x, %d) %s: %s" %
              (self.name, addr, length, what, self.status(st)))
        print("  %-12s %-34s id %d buffer id %d key %#x+%d kind %d" %
              (self.name, what, info.id, info.buffer_id, info.key_addr,
               info.key_length, info.kind))
        return info

    def query(self, addr):
        info = PtrInfo()
        st = self.lib.gdrc_ptr_query(self.ctx, addr, ctypes.byref(info))
        return st, info

    def stats(self):
        buf = ctypes.create_string_buffer(1 << 14)
        check(self.lib.gdrc_stats_dump(self.ctx, GDRC_DUMP_JSON, buf,
                                       len(buf), None) == GDRC_OK,
              "gdrc_stats_dump")
        return json.loads(buf.value.decode())

    def fini(self):
        self.lib.gdrc_fini(self.ctx)
        self.ctx = None


def mapping(probe, addr, what):
    """The VMM mapping holding addr, as gdrc_ptr_query reports it."""
    st, info = probe.query(addr)
    check(st == GDRC_OK, "gdrc_ptr_query(%#x) (%s): %s" %
          (addr, what, probe.status(st)))
    return info


def mapped(probe, start, end):
    """Is [start, end) all mapped VMM memory?"""
    addr = start
    while addr < end:
        st, info = probe.query(addr)
        if st != GDRC_OK or info.kind != GDRC_PTR_VMM or not info.alloc_size:
            return False
        addr = info.alloc_base + info.alloc_size
    return True


def run(torch, lib):
    torch.zeros(1, device="cuda")  # the runtime and its context first
    # Asked about pointers, never given a registration: fresh answers.
    probe = Ctx(lib)

    first = torch.empty(FIRST_SIZE, dtype=torch.uint8, device="cuda")
    second = torch.empty(SECOND_SIZE, dtype=torch.uint8, device="cuda")
    p1, p2 = first.data_ptr(), second.data_ptr()
    live_seg = mapping(probe, p1, "first tensor")
    print("first tensor %#x+%d: kind %d, mapping %#x+%d" %
          (p1, FIRST_SIZE, live_seg.kind, live_seg.alloc_base,
           live_seg.alloc_size))
    if live_seg.kind != GDRC_PTR_VMM:
        print("skipped: expandable segments not in use (kind %d, not VMM)"
              % live_seg.kind)
        return 77

    # Two whole pieces inside the second tensor.
    m0 = mapping(probe, p2, "second tensor")
    start = p2 if m0.alloc_base == p2 else m0.alloc_base + m0.alloc_size
    s1 = mapping(probe, start, "first whole piece")
    check(s1.kind == GDRC_PTR_VMM and s1.alloc_base == start and
          s1.alloc_size > 0,
          "gdrc_ptr_query does not report the piece at %#x: kind %d, "
          "mapping %#x+%d (the second tensor's first one: %#x+%d)" %
          (start, s1.kind, s1.alloc_base, s1.alloc_size, m0.alloc_base,
           m0.alloc_size))
    s2 = mapping(probe, s1.alloc_base + s1.alloc_size, "second whole piece")
    end = s2.alloc_base + s2.alloc_size
    print("second tensor %#x+%d; pieces %#x+%d (buffer id %d), %#x+%d "
          "(buffer id %d)" % (p2, SECOND_SIZE, s1.alloc_base, s1.alloc_size,
                              s1.buffer_id, s2.alloc_base, s2.alloc_size,
                              s2.buffer_id))
    check(s2.kind == GDRC_PTR_VMM and s2.alloc_size > 0,
          "no second piece after %#x" % s2.alloc_base)
    check(end <= p2 + SECOND_SIZE,
          "the second tensor does not hold two whole pieces")
    check(live_seg.alloc_base + live_seg.alloc_size <= start,
          "the first tensor's piece is not before the second's")
    length = end - start
    live_len = min(LIVE_LEN, FIRST_SIZE)

    ctxs = [Ctx(lib, v, h) for v, h in MODES]
    before, live = {}, {}
    for c in ctxs:
        live[c.name] = c.must_get(p1, live_len, "inside the first tensor")
        before[c.name] = info = c.must_get(start, length,
                                           "two pieces of the second")
        check(info.kind == GDRC_PTR_VMM, "%s: kind %d" % (c.name, info.kind))
        check(info.key_addr == start and info.key_length == length,
              "%s: key %#x+%d, expected the two pieces %#x+%d" %
              (c.name, info.key_addr, info.key_length, start, length))
        check(info.buffer_id == s1.buffer_id,
              "%s: buffer id %d, the first piece's is %d" %
              (c.name, info.buffer_id, s1.buffer_id))
        again = c.must_get(start + MIB, MIB, "inside them again")
        check(again.id == info.id, "%s: not served again" % c.name)

    del second
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    st, _ = probe.query(start)
    print("after empty_cache: gdrc_ptr_query at %#x: %s" %
          (start, probe.status(st)))
    check(st == GDRC_ERR_UNSUPPORTED,
          "empty_cache left the second tensor's pieces mapped")
    # A get over the hole is refused (asked in probe, so that the mode
    # contexts' registrations meet the remap itself).
    st, _ = probe.get(start, length)
    print("after empty_cache: gdrc_mr_get over the pieces: %s" %
          probe.status(st))
    check(st == GDRC_ERR_UNSUPPORTED,
          "a get over the unmapped pieces: %s" % probe.status(st))
    for c in ctxs:
        info = c.must_get(p1, live_len, "first tensor after empty_cache")
        check(info.id == live[c.name].id,
              "%s: the live tensor's registration was not served "
              "(id %d, was %d)" % (c.name, info.id, live[c.name].id))

    # The same addresses mapped again.
    held, found = [], None
    for i in range(REALLOC_TRIES):
        t = torch.empty(SECOND_SIZE, dtype=torch.uint8, device="cuda")
        held.append(t)
        q = t.data_ptr()
        overlaps = q < end and start < q + SECOND_SIZE
        print("allocation %d: %#x+%d %s the registered range" %
              (i, q, SECOND_SIZE, "overlaps" if overlaps else "misses"))
        if overlaps and mapped(probe, start, end):
            found = t
            break
    if found is None:
        print("skipped: the pieces' addresses were not mapped again after "
              "%d allocations: no remap to check" % REALLOC_TRIES)
        for c in ctxs:
            c.fini()
        probe.fini()
        return 77
    n1 = mapping(probe, start, "remapped piece")
    print("remapped: %#x+%d buffer id %d (was %d)" %
          (n1.alloc_base, n1.alloc_size, n1.buffer_id, s1.buffer_id))
    check(n1.buffer_id != s1.buffer_id, "the driver kept the BUFFER_ID")

    ok = True
    for c in ctxs:
        info = c.must_get(start, length, "two pieces, remapped")
        old = before[c.name]
        if info.id == old.id or info.buffer_id == old.buffer_id:
            print("FAIL %s: stale registration served (id %d buffer id %d, "
                  "before id %d buffer id %d)" %
                  (c.name, info.id, info.buffer_id, old.id, old.buffer_id))
            ok = False
        check(info.buffer_id == n1.buffer_id or info.id == old.id,
              "%s: buffer id %d, the remapped piece's is %d" %
              (c.name, info.buffer_id, n1.buffer_id))
        again = c.must_get(p1, live_len, "first tensor after the remap")
        if again.id != live[c.name].id:
            print("FAIL %s: the live tensor got a new registration" %
                  c.name)
            ok = False
        s = c.stats()
        print("  %-12s tag_checks %d hits %d invalidations %d "
              "(inv_cuda_hook %d, inv_tag_check %d, cuda_events %d)" %
              (c.name, s["tag_checks"], s["hits"], s["invalidations"],
               s["inv_cuda_hook"], s["inv_tag_check"], s["cuda_events"]))
    del found, held
    for c in ctxs:
        c.fini()
    probe.fini()
    if not ok:
        raise Failure("see the FAIL lines above")
    print("ok")
    return 0


def main():
    if len(sys.argv) != 2:
        print("usage: %s path/to/libgdrcache.so" % sys.argv[0])
        return 1
    for k in KNOBS:
        os.environ.pop(k, None)
    torch = torch_on_gpu()
    if torch is None:
        return SKIPPED
    print("PYTORCH_CUDA_ALLOC_CONF=%s, torch %s" %
          (os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), torch.__version__))
    lib = load_gdrcache(sys.argv[1])
    try:
        return run(torch, lib)
    except Failure as e:
        print("FAIL: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
