#!/bin/bash
# scratch: device run 1 of this session
mkdir -p /tmp/deps && for f in .device-debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export CMAKE_PREFIX_PATH=/tmp/deps/usr C_INCLUDE_PATH=/tmp/deps/usr/include LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu
set -x
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/smi.txt 2>&1
cd tests/gpu
nvcc -O1 -cudart shared -o /tmp/fp_dyn free_probe.c -lcuda -ldl > $OUT/nvcc.txt 2>&1
nvcc -O1 -cudart static -o /tmp/fp_static free_probe.c -lcuda -ldl >> $OUT/nvcc.txt 2>&1
gcc -O1 -shared -fPIC -DFREE_PROBE_LIB -o /tmp/libfp.so free_probe.c -ldl >> $OUT/nvcc.txt 2>&1
timeout 60 /tmp/fp_dyn $OUT/bytes_dyn.txt > $OUT/probe_dyn.txt 2>&1
timeout 60 /tmp/fp_static $OUT/bytes_static.txt > $OUT/probe_static.txt 2>&1
cat > /tmp/t.py <<'PY'
import ctypes, sys, torch
torch.zeros(1, device='cuda')
lib = ctypes.CDLL(sys.argv[1]); lib.probe_arm(None); lib.probe_report(b"torch arm")
x = torch.empty(1 << 22, device='cuda'); lib.probe_report(b"torch empty")
del x; lib.probe_report(b"torch del")
torch.cuda.empty_cache(); lib.probe_report(b"torch empty_cache")
y = torch.empty(1 << 22, device='cuda').pin_memory() if False else torch.empty(1 << 20).pin_memory(); lib.probe_report(b"torch pin_memory")
del y; lib.probe_report(b"torch del pinned")
PY
timeout 120 python3 /tmp/t.py /tmp/libfp.so > $OUT/probe_torch.txt 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda); import torch.cuda; print(torch.cuda.get_device_name())" >> $OUT/probe_torch.txt 2>&1
ldd $(python3 -c "import torch,os; print(os.path.join(os.path.dirname(torch.__file__),'lib','libtorch_cuda.so'))") | grep -i cuda >> $OUT/probe_torch.txt 2>&1
cd ../..
cmake -S . -B /tmp/b -DCMAKE_BUILD_TYPE=RelWithDebInfo > $OUT/cmake.txt 2>&1 && cmake --build /tmp/b -j16 >> $OUT/cmake.txt 2>&1
(cd /tmp/b && ctest -L gpu --output-on-failure > $OUT/ctest_gpu.txt 2>&1)
for i in 1 2 3; do /tmp/b/tests/bench/gdrc-bench --gpu-only > $OUT/bench_gpu_$i.txt 2>&1; done
