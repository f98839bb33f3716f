#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A small PyTorch training run, to compare with and without
LD_PRELOAD=libgdrcache-preload.so: it must complete and print the very
same numbers (the hooks change no result).

Trains a 3-layer MLP on random data for a few steps with SGD, frees and
reallocates along the way (torch.cuda.empty_cache after each epoch, so
the caching allocator gives its segments back with cudaFree), and prints
the loss of every step and a checksum of the weights, bit for bit.

With devices > 1, each device trains a model of its own and the steps
take turns: torch.cuda.set_device(step % devices) before each, so that
the current device (and the runtime's current context) changes between
steps, as a process driving several GPUs from one thread does.

Usage: torch_train.py [steps [devices]]
Exit 77 without torch, a GPU, or as many GPUs as asked.
"""
import os
import struct
import sys

from gdrc_ctypes import SKIPPED, torch_on_gpu


def main():
    torch = torch_on_gpu()
    if torch is None:
        return SKIPPED
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(1234)
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    ndev = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    if torch.cuda.device_count() < ndev:
        print("skipped: %d devices asked, %d there" %
              (ndev, torch.cuda.device_count()))
        return SKIPPED
    models, opts = [], []
    for d in range(ndev):
        model = torch.nn.Sequential(
            torch.nn.Linear(512, 2048), torch.nn.ReLU(),
            torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
            torch.nn.Linear(2048, 10)).to(torch.device("cuda", d))
        models.append(model)
        opts.append(torch.optim.SGD(model.parameters(), lr=0.01,
                                    momentum=0.9))
    gen = torch.Generator(device="cpu").manual_seed(99)
    for step in range(steps):
        d = step % ndev
        torch.cuda.set_device(d)
        dev = torch.device("cuda")  # the current device
        model, opt = models[d], opts[d]
        x = torch.randn(256, 512, generator=gen).to(dev)
        y = torch.randint(0, 10, (256,), generator=gen).to(dev)
        # A large temporary: its own segment, freed by empty_cache.
        scratch = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
        scratch.fill_(step & 0xff)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        del scratch
        if step % 10 == 9:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        print("step %d device %d loss %s" %
              (step, x.device.index, struct.pack(">f", loss.item()).hex()))
    with torch.no_grad():
        total = sum(p.double().sum().item()
                    for m in models for p in m.parameters())
    print("weights checksum %r" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
