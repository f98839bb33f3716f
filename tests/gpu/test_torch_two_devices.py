#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch tensors of two GPUs registered through libgdrcache while
torch.cuda.set_device switches the current device.

A tensor of each device is registered with the other device current:
each registration must name its own device, and a get with either
device current is served the same one.  Device 1's tensor is then
dropped and PyTorch's cache emptied with device 0 current (the caching
allocator frees device 1's segment with cudaFree under its own device
guard): the CUDA free hook must invalidate exactly that registration,
device 0's staying cached, and memory at device 1's freed addresses must
get a registration of its own.  GDRC_VALIDATE=hooks, so that no BUFFER_ID
check can hide a missed free.

Usage: test_torch_two_devices.py path/to/libgdrcache.so
Exit 0 on success, 77 when torch or two GPUs are missing, 1 on failure.
"""
import sys

from gdrc_ctypes import (SKIPPED, hooked_context, load_gdrcache, register,
                         stats, torch_on_gpu)

SIZE = 64 << 20  # its own segment: cudaMalloc of exactly this


def main():
    torch = torch_on_gpu()
    if torch is None:
        return SKIPPED
    if torch.cuda.device_count() < 2:
        print("skipped: one GPU")
        return SKIPPED
    for d in (0, 1):
        torch.zeros(1, device=torch.device("cuda", d))  # contexts first
    lib = load_gdrcache(sys.argv[1])
    ctx = hooked_context(lib)

    t = [torch.empty(SIZE, dtype=torch.uint8,
                     device=torch.device("cuda", d)) for d in (0, 1)]
    ptr = [x.data_ptr() for x in t]
    first = [None, None]
    for cur in (0, 1):
        torch.cuda.set_device(cur)
        other = 1 - cur
        first[other] = register(lib, ctx, ptr[other])
        print("device %d current: device %d's tensor %#x registered: "
              "id %d device %d buffer id %d" %
              (cur, other, ptr[other], first[other].id,
               first[other].device, first[other].buffer_id))
        assert first[other].device == other
        assert torch.cuda.current_device() == cur
    hits = stats(lib, ctx)["hits"]
    for cur in (0, 1):
        torch.cuda.set_device(cur)
        for d in (0, 1):
            assert register(lib, ctx, ptr[d]).id == first[d].id
    s = stats(lib, ctx)
    assert s["hits"] == hits + 4, (s["hits"], hits)
    assert s["regions"] == 2

    # Device 1's tensor freed with device 0 current.
    torch.cuda.set_device(0)
    lo = first[1].key_addr
    hi = lo + first[1].key_length
    del t[1]
    torch.cuda.synchronize(1)
    torch.cuda.empty_cache()
    assert torch.cuda.current_device() == 0
    again0 = register(lib, ctx, ptr[0])  # applies the queued invalidation
    s = stats(lib, ctx)
    print("after device 1's free: inv_cuda_hook %d, regions %d, "
          "cuda_events %d" % (s["inv_cuda_hook"], s["regions"],
                              s["cuda_events"]))
    assert again0.id == first[0].id, "device 0's registration went too"
    assert s["inv_cuda_hook"] == 1, "device 1's free was not seen"
    assert s["regions"] == 1
    assert s["tag_checks"] == 0 and s["inv_tag_check"] == 0

    # Device 1's freed addresses again, if the driver hands them out.
    held, found, second = [], None, None
    for size in (SIZE, 20 << 20, 2 << 20):
        for _ in range(32):
            if found is not None:
                break
            x = torch.empty(size, dtype=torch.uint8,
                            device=torch.device("cuda", 1))
            held.append(x)
            if lo <= x.data_ptr() < hi:
                found, second = x, register(lib, ctx, x.data_ptr())
    if found is None:
        print("device 1's freed addresses did not come back: "
              "no reuse to check")
    else:
        print("device 1's freed address %#x again: id %d (was %d), "
              "buffer id %d (was %d)" %
              (found.data_ptr(), second.id, first[1].id,
               second.buffer_id, first[1].buffer_id))
        assert second.id != first[1].id
        assert second.buffer_id != first[1].buffer_id
        assert second.device == 1
    del held, found, t
    lib.gdrc_fini(ctx)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
