#!/usr/bin/env bash
# The GPU checks, for a session that is lent a device machine (an NVIDIA GPU with nvcc, torch, CuPy, meson, ninja,
# pybind11 and pytest installed, no network). One prepared run:
#   0. the delegate's CUDA kernels against its host path (tools/gpu/cuda_kernel_check.cu),
#   1. builds the CUDA-enabled extension there with nvcc (plain meson: meson-python is not installed there),
#   2. runs the GPU suite tests/test_pybindings_cuda_dlpack.py in both output modes with
#      EXECUTORCH_PYBIND_TEST_REQUIRE_CUDA=1 (a skip is a failure),
#   3. runs the CPU Python suite against the CUDA build,
#   4. runs bench/cuda.py (per-call overhead and clone cost on the GPU).
# Everything is logged to ${OUT:-/tmp/gpu-checks}/log. The DLPack header is not installed there: copy
# /usr/include/dlpack into .gpu/include/ (ignored by git) and carry `.gpu` with the run, e.g.
#   mkdir -p .gpu/include && cp -r /usr/include/dlpack .gpu/include/ && echo /.gpu/ >> .git/info/exclude
#   run(command="bash tools/gpu/run_gpu_checks.sh", carry=[".gpu"], timeout_s=540)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out=${OUT:-/tmp/gpu-checks}
mkdir -p "$out"
exec > >(tee "$out/log") 2>&1
export PYTHONUNBUFFERED=1
status=0
step() { echo; echo "== $*"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -1
python3 -c "import sys, torch, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__)"
python3 -c "import cupy; print('cupy', cupy.__version__)" || echo "cupy: not importable"

arch=$(python3 -c "import torch; c = torch.cuda.get_device_capability(); print(f'{c[0]}{c[1]}')" 2>/dev/null || echo 90)
# cuBLAS from the pip wheel torch uses; without it the delegate falls back to its own GEMM kernel (and logs it).
cublas=$(python3 -c "import glob, os, nvidia; print(next(iter(sorted(glob.glob(os.path.join(p, '**', 'libcublas.so*'), recursive=True) for p in nvidia.__path__)), [''])[0])" 2>/dev/null)
[ -n "$cublas" ] && export ETRT_CUBLAS_LIBRARY="$cublas" && echo "cuBLAS: $cublas"
step "CUDA kernels against the host path (sm_$arch)"
nvcc -std=c++20 -O2 -Iinclude -Itests/cpp/device -diag-suppress 1675 -gencode "arch=compute_$arch,code=sm_$arch" \
  tools/gpu/cuda_kernel_check.cu bindings/cuda_delegate.cu -o /tmp/etrt-kernel-check && /tmp/etrt-kernel-check || status=1

step "build (meson, cuda=enabled)"
command -v meson >/dev/null 2>&1 || meson() { python3 -m mesonbuild.mesonmain "$@"; }
[ -d .gpu/include ] && export CPPFLAGS="-I$root/.gpu/include"
build=/tmp/etrt-gpu-build
meson setup "$build" --wipe -Dcuda=enabled -Dgpu_sm="$arch" -Dmarch= -Dtests=false --buildtype=release \
  >"$out/meson-setup.txt" 2>&1 || { cat "$out/meson-setup.txt"; exit 1; }
grep -E "CUDA build|Cuda compiler" "$out/meson-setup.txt"
time ninja -C "$build" >"$out/ninja.txt" 2>&1 || { tail -50 "$out/ninja.txt"; exit 1; }
pkg=/tmp/etrt-gpu-pkg/executorch_portable_lib
rm -rf /tmp/etrt-gpu-pkg && mkdir -p "$pkg"
cp bindings/executorch_portable_lib/*.py "$pkg/"
cp "$build"/_C*.so "$pkg/"
# What the installed .pth file does in a site directory (PYTHONPATH entries get no .pth processing).
echo "import executorch_portable_lib" > /tmp/etrt-gpu-pkg/sitecustomize.py
export PYTHONPATH=/tmp/etrt-gpu-pkg
python3 -c "from executorch.extension.pybindings import portable_lib as p; print('imported; cuda build:', p._cuda_enabled(), 'backends:', p._get_registered_backend_names())"

step "GPU suite, torch output mode"
(cd tests && EXECUTORCH_PYBIND_TEST_REQUIRE_CUDA=1 python3 -m pytest -q -rs -p no:cacheprovider test_pybindings_cuda_dlpack.py) || status=1
step "GPU suite, ExecuTorchResult output mode"
(cd tests && EXECUTORCH_PYBIND_TEST_REQUIRE_CUDA=1 EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=executorch \
  python3 -m pytest -q -rs -p no:cacheprovider test_pybindings_cuda_dlpack.py) || status=1

step "CPU suite against the CUDA build"
(cd tests/python && python3 -m pytest -q -p no:cacheprovider -x .) || status=1

step "benchmark"
python3 bench/cuda.py || status=1

step "done: status $status"
exit $status
