#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch frees seen by libgdrcache's CUDA free hooks.

PyTorch's caching allocator calls cudaMalloc/cudaFree through the dynamic
runtime, which reaches the driver through cuGetProcAddress pointers: no
symbol interposition sees those frees.  This registers a tensor's memory
through libgdrcache (ctypes, GDRC_VALIDATE=hooks so that no BUFFER_ID
check can hide a missed free), drops the tensor and empties PyTorch's
cache (cudaFree), allocates until the same address comes back, and checks
that the CUDA hook invalidated the registration and the new allocation
gets a new one.

Usage: test_torch_free.py path/to/libgdrcache.so
Exit 0 on success, 77 when torch or a GPU is missing, 1 on failure.
"""
import sys

from gdrc_ctypes import (GDRC_MR_INFO_TAG_CHECKED, SKIPPED, hooked_context,
                         load_gdrcache, register, stats, torch_on_gpu)

SIZE = 64 << 20  # its own segment: cudaMalloc of exactly this


def main():
    torch = torch_on_gpu()
    if torch is None:
        return SKIPPED
    torch.zeros(1, device="cuda")  # the runtime and its context first
    lib = load_gdrcache(sys.argv[1])
    ctx = hooked_context(lib)

    t = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
    ptr = t.data_ptr()
    first = register(lib, ctx, ptr)
    print("registered %#x: id %d buffer id %d key %#x+%d" %
          (ptr, first.id, first.buffer_id, first.key_addr, first.key_length))
    assert not first.flags & GDRC_MR_INFO_TAG_CHECKED
    before = stats(lib, ctx)
    del t
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    after_free = stats(lib, ctx)
    print("cuda events: %d -> %d" % (before["cuda_events"],
                                     after_free["cuda_events"]))
    assert after_free["cuda_events"] > before["cuda_events"], \
        "empty_cache's cudaFree was not seen"

    # Any get applies the queued invalidations: a tensor of its own.
    lo, hi = first.key_addr, first.key_addr + first.key_length
    other = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    other_info = register(lib, ctx, other.data_ptr())
    s = stats(lib, ctx)
    print("after the free: inv_cuda_hook %d, tag checks %d" %
          (s["inv_cuda_hook"], s["tag_checks"]))
    assert s["inv_cuda_hook"] == 1, "the registration outlived its memory"
    assert s["tag_checks"] == 0 and s["inv_tag_check"] == 0

    # Memory at the freed addresses again, if the driver hands them out:
    # the caching allocator asks cudaMalloc for whole segments of these
    # sizes.  Any of it must get a registration of its own.
    held = [other]
    found, second = None, None
    if lo <= other.data_ptr() < hi:
        found, second = other, other_info
    for size in (SIZE, 20 << 20, 2 << 20):
        for _ in range(32):
            if found is not None:
                break
            t2 = torch.empty(size, dtype=torch.uint8, device="cuda")
            held.append(t2)
            if lo <= t2.data_ptr() < hi:
                found, second = t2, register(lib, ctx, t2.data_ptr())
    if found is None:
        print("the freed addresses did not come back: no reuse to check")
        lib.gdrc_fini(ctx)
        print("ok")
        return 0
    s = stats(lib, ctx)
    print("freed memory's address %#x again: id %d buffer id %d; "
          "inv_cuda_hook %d, "
          "tag checks %d, inv_tag_check %d" %
          (found.data_ptr(), second.id, second.buffer_id,
           s["inv_cuda_hook"], s["tag_checks"],
           s["inv_tag_check"]))
    assert second.id != first.id
    assert second.buffer_id != first.buffer_id
    assert s["inv_cuda_hook"] == 1
    assert s["tag_checks"] == 0 and s["inv_tag_check"] == 0
    del found, held
    lib.gdrc_fini(ctx)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
