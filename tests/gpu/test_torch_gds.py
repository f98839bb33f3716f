#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch's GPUDirect Storage file, unmodified, with and without the cache.

torch.cuda.gds.GdsFile writes storages to a file with cuFileWrite and reads
them back with cuFileRead; gds_register_buffer and gds_deregister_buffer
are cuFileBufRegister and cuFileBufDeregister of a storage.  This runs one
program (this file with --child) twice: plainly, and with
LD_PRELOAD=libgdrcache-preload.so and GDRC_STATS=1, under which the
program's cuFile registrations are served by a cache that registers with
cuFile (docs/hooks.md, "cuFile programs").  Each run:

  1. saves three random float tensors (1 MiB, 16 MiB, 256 KiB; seeded, so
     both runs make the same) at 4 KiB-aligned offsets of one file with
     GdsFile.save_storage, checks the file's bytes with plain reads, and
     loads each into a fresh tensor with GdsFile.load_storage, twice,
     comparing with torch.equal;
  2. loads them again into fresh tensors registered first, as a program
     that registers its buffers does: gds_register_buffer, load_storage,
     gds_deregister_buffer, two rounds (under the preload the second
     round's registrations are cache hits);
  3. registers a 4 MiB tensor's storage and drops the tensor without
     deregistering it, empties PyTorch's cache (cudaFree of its segment),
     allocates until a tensor lands at the same address and registers
     that: plain libcufile refuses it (5023: the old registration
     outlived its memory, shared/research/storage-probe.md), under the
     preload the registration was released inside the free and this one
     succeeds; the tensor is loaded and compared either way.

The test passes when both runs load equal tensors and print the same
digest of them, the preload's run printed the cache's counters (the
library's "stats {...}" line at exit) with misses and hits, and its third
step registered the tensor at the reused address (when the address came
back at all).  The plain run's third step is reported, not judged.

Usage: test_torch_gds.py PRELOAD_SO    (the test)
       test_torch_gds.py --child       (one run)
Exit 0 on success, 77 (the reason printed) without torch, a GPU, torch's
cuFile support, or when cuFile refuses GdsFile's file handle (in a
container without /run/udev, tests/gpu/udev_entry.sh writes the entry
it needs); 1 on failure.  The file goes in GDRC_TEST_CUFILE_DIR (default
/tmp) and is removed.
"""
import ctypes
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

SKIPPED = 77  # ctest's SKIP_RETURN_CODE
MIB = 1 << 20
# float32 elements: 1 MiB, 16 MiB and 256 KiB, at 4 KiB-aligned offsets.
SIZES = (MIB // 4, 16 * MIB // 4, 256 * 1024 // 4)


def offsets():
    """Each tensor's offset in the file, one after the other."""
    out, at = [], 0
    for n in SIZES:
        out.append(at)
        at += n * 4
    return out


def skip(why):
    print("skipped: " + why)
    sys.exit(SKIPPED)


def torch_gds():
    """torch with a GPU and its cuFile bindings, else a skip."""
    try:
        import torch
        import torch.cuda.gds  # noqa: F401  (PyTorch 2.5 and later)
    except ImportError as e:
        skip("no torch, or no torch.cuda.gds (%s)" % e)
    if not torch.cuda.is_available():
        skip("no GPU")
    return torch


def loaded_cufile():
    """The libcufile this process loaded (torch's own, with its cuFile
    bindings), or None."""
    with open("/proc/self/maps") as maps:
        for ln in maps:
            path = ln.split()[-1]
            if "/libcufile.so" in path:
                return path
    return None


def host_bytes(t):
    """A tensor's bytes, copied to the host (no numpy needed)."""
    h = t.detach().contiguous().cpu()
    return ctypes.string_at(h.data_ptr(), h.nbytes)


def child():
    torch = torch_gds()
    gds = torch.cuda.gds
    # The cache must register with the libcufile torch reads with, not
    # another copy (the toolkit's, where GDRC_CUFILE_LIBRARY names it):
    # a registration is only seen by the instance that made it.  The
    # library reads the knob at its first cuFile context, made at the
    # preload's first cuFile call.
    # Not loaded yet: by its name, which finds torch's once torch has
    # loaded it (before its first cuFile call reaches the preload).
    lib = loaded_cufile()
    if lib:
        os.environ["GDRC_CUFILE_LIBRARY"] = lib
    else:
        os.environ.pop("GDRC_CUFILE_LIBRARY", None)
    print("libcufile: %s" % (lib or "none loaded yet"))
    folder = os.environ.get("GDRC_TEST_CUFILE_DIR", "/tmp")
    fd, path = tempfile.mkstemp(prefix="gdrc-torch-gds.", dir=folder)
    os.close(fd)
    try:
        try:
            f = gds.GdsFile(path, os.O_CREAT | os.O_RDWR)
        except RuntimeError as e:
            msg = str(e)
            if "cuFileHandleRegister" in msg:
                skip("GdsFile: %s (cuFile takes no handle for %s: in a "
                     "container without /run/udev, tests/gpu/udev_entry.sh "
                     "writes the entry it needs)" % (msg, folder))
            if "not supported on this platform" in msg:
                skip("this torch has no cuFile support: %s" % msg)
            raise
        return run(torch, gds, f, path)
    finally:
        os.unlink(path)


def run(torch, gds, f, path):
    torch.manual_seed(1234)
    src = [torch.randn(n, device="cuda") for n in SIZES]
    offs = offsets()
    digest = hashlib.sha256()

    # 1. Save, check the file, load twice.
    for t, off in zip(src, offs):
        f.save_storage(t.untyped_storage(), offset=off)
    torch.cuda.synchronize()
    with open(path, "rb") as plain:
        for i, (t, off) in enumerate(zip(src, offs)):
            plain.seek(off)
            if plain.read(t.nbytes) != host_bytes(t):
                print("save_storage: tensor %d's bytes are not in the file"
                      % i)
                return 1
    print("saved: %d tensors, %d bytes, the file checked" %
          (len(src), sum(t.nbytes for t in src)))
    # zero_() is a kernel on PyTorch's stream, and cuFile's copy into
    # the buffer (compatibility mode) is not ordered after it: wait for
    # it, or a quick registration (the cache's, under the preload) lets
    # the zeroing land after the data.
    for i, (t, off) in enumerate(zip(src, offs)):
        dst = torch.empty_like(t)
        for _ in range(2):
            dst.zero_()
            torch.cuda.synchronize()
            f.load_storage(dst.untyped_storage(), offset=off)
            if not torch.equal(dst, t):
                print("load_storage: tensor %d differs" % i)
                return 1
        digest.update(host_bytes(dst))
    print("loaded: every tensor equal, twice")

    # 2. Registered buffers, two rounds on the same storages.
    dsts = [torch.empty_like(t) for t in src]
    for rnd in range(2):
        for i, (t, dst, off) in enumerate(zip(src, dsts, offs)):
            dst.zero_()
            torch.cuda.synchronize()
            s = dst.untyped_storage()
            gds.gds_register_buffer(s)
            f.load_storage(s, offset=off)
            gds.gds_deregister_buffer(s)
            if not torch.equal(dst, t):
                print("registered load, round %d: tensor %d differs" %
                      (rnd, i))
                return 1
    for dst in dsts:
        digest.update(host_bytes(dst))
    print("registered loads: every tensor equal, two rounds")

    # 3. Freed while registered, the address allocated again.
    n = 4 * MIB // 4
    t = torch.empty(n, device="cuda")
    gds.gds_register_buffer(t.untyped_storage())
    ptr = t.data_ptr()
    del t
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # cudaFree of its segment
    held, again = [], None
    for _ in range(16):
        u = torch.empty(n, device="cuda")
        if u.data_ptr() == ptr:
            again = u
            break
        held.append(u)
    if again is None:
        print("phase3: the freed address did not come back")
    else:
        try:
            gds.gds_register_buffer(again.untyped_storage())
            print("phase3: the same address registered again: ok")
            registered = True
        except RuntimeError as e:
            print("phase3: the same address refused: %s" %
                  str(e).splitlines()[0])
            registered = False
        again.zero_()
        torch.cuda.synchronize()
        f.load_storage(again.untyped_storage(), offset=offs[0])
        want = src[0]
        if not torch.equal(again[:want.numel()], want):
            print("phase3: the load into the reused address differs")
            return 1
        if registered:
            gds.gds_deregister_buffer(again.untyped_storage())
    del held
    print("digest " + digest.hexdigest())
    f.deregister_handle()
    return 0


def run_child(env):
    return subprocess.run([sys.executable, os.path.abspath(__file__),
                           "--child"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True,
                          check=False)


def lines(text, prefix):
    return [ln for ln in text.splitlines() if ln.startswith(prefix)]


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--child":
        return child()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    so = os.path.abspath(sys.argv[1])
    if not os.path.exists(so):
        print("no %s" % so)
        return 1

    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    plain = run_child(env)
    sys.stdout.write(plain.stdout)
    if plain.returncode == SKIPPED:
        return SKIPPED
    if plain.returncode != 0:
        sys.stdout.write(plain.stderr)
        print("torch_gds: the plain run failed (%d)" % plain.returncode)
        return 1

    env.update(LD_PRELOAD=so, GDRC_STATS="1")
    pre = run_child(env)
    print("--- with LD_PRELOAD=%s" % so)
    sys.stdout.write(pre.stdout)
    gdrc = [ln for ln in pre.stderr.splitlines() if "gdrc[" in ln]
    for ln in gdrc:
        print("  " + ln)
    if pre.returncode != 0:
        sys.stdout.write(pre.stderr)
        print("torch_gds: the run under the preload failed (%d)" %
              pre.returncode)
        return 1

    failed = []
    if lines(plain.stdout, "digest") != lines(pre.stdout, "digest") or \
            not lines(pre.stdout, "digest"):
        failed.append("the tensors loaded differ between the runs")
    stats = []
    for ln in gdrc:
        m = re.search(r"stats (\{.*\})", ln)
        if m:
            stats.append(json.loads(m.group(1)))
    hits = sum(s.get("hits", 0) for s in stats)
    misses = sum(s.get("misses", 0) for s in stats)
    free_deregs = sum(s.get("free_deregs", 0) for s in stats)
    print("preload: %d context(s) printed stats: misses %d, hits %d, "
          "free_deregs %d" % (len(stats), misses, hits, free_deregs))
    if not stats:
        failed.append("no \"stats {...}\" line from the preload "
                      "(GDRC_STATS=1): its cuFile calls were not served")
    elif not misses or not hits:
        failed.append("the preload's cache registered %d and hit %d times: "
                      "the second round's registrations should hit" %
                      (misses, hits))
    if lines(pre.stdout, "phase3: the same address refused"):
        failed.append("under the preload a registration outlived the "
                      "memory PyTorch freed")
    p3 = lines(plain.stdout, "phase3")
    if p3:
        print("plain libcufile, for comparison: " + p3[0])
    if failed:
        for f in failed:
            print("torch_gds: " + f)
        return 1
    print("torch_gds: the same tensors with and without the preload")
    return 0


if __name__ == "__main__":
    sys.exit(main())
