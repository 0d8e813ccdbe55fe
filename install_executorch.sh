#!/usr/bin/env bash
# Installs everything the build and the tests need, then builds and installs the bindings.
#
#   ./install_executorch.sh            # system packages, .venv (unless a venv is active), torch (CPU), the package
#   ./install_executorch.sh --no-torch # the same without torch (outputs are then ExecuTorchResult)
#   ./install_executorch.sh --cuda     # the CUDA-enabled build (meson cuda=enabled): needs nvcc and the CUDA runtime
#                                      # (CUDA Toolkit >= 12); builds and imports without a GPU
#
# After it: `. .venv/bin/activate` (when it created .venv) and `python -c "from executorch.extension.pybindings
# import portable_lib"` works.
set -euo pipefail
cd "$(dirname "$0")"
root=$(pwd)

with_torch=1
cuda=disabled
for arg in "$@"; do
  case "$arg" in
    --no-torch) with_torch=0 ;;
    --cuda) cuda=enabled ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done

# 1. System packages (Debian): the C++ header packages the build and the C++ tests use, and clang with libFuzzer
#    and the sanitizer runtimes for the fuzz target (tests/fuzz/run.sh), and qemu-user, which runs the package as
#    older CPUs in tests/python/test_cpu_baseline.py.
apt_packages=(catch2 libdlpack-dev librange-v3-dev g++ pkg-config clang libclang-rt-dev qemu-user)
missing=()
for p in "${apt_packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing system packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. A virtual environment: the active one, or .venv at the checkout's root.
if [ -n "${VIRTUAL_ENV:-}" ]; then
  py="$VIRTUAL_ENV/bin/python"
else
  [ -x "$root/.venv/bin/python" ] || python3 -m venv "$root/.venv"
  py="$root/.venv/bin/python"
fi
echo "== using $py"

# 3. Python packages for the build (no build isolation) and the tests.
"$py" -m pip install -q meson meson-python ninja pybind11 numpy pytest mypy "tomli; python_version < '3.11'"
if [ "$with_torch" = 1 ]; then
  # The CPU build: torch is only ever used through its Python API (outputs via DLPack), never linked.
  "$py" -m pip install -q "torch==2.13.0"
fi

# 4. Build and install the package. The CUDA build finds nvcc on PATH or in the toolkit's usual place.
if [ "$cuda" = enabled ] && ! command -v nvcc >/dev/null 2>&1; then
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then export PATH="$d/bin:$PATH"; break; fi
  done
  command -v nvcc >/dev/null 2>&1 || { echo "--cuda: nvcc not found (install the CUDA Toolkit or set CUDA_HOME)" >&2; exit 1; }
fi
# The build directory is kept (build/py, or build/py-cuda) so that a re-run, and the wheel the packaging test makes,
# recompile only what changed. pip runs verbose so that ninja's [n/total] lines show the build's progress.
build_dir=build/py
[ "$cuda" = enabled ] && build_dir=build/py-cuda
echo "== building and installing the bindings (cuda=$cuda, build directory $build_dir; a first build takes minutes)"
mkdir -p "$root/build"
set +o pipefail
"$py" -m pip install -v . --no-build-isolation -Cbuild-dir="$build_dir" -Csetup-args=-Dcuda="$cuda" 2>&1 \
  | tee "$root/$build_dir.log" | grep --line-buffered -E '^ *\[[0-9]+/[0-9]+\] (Compiling|Linking)|error:|FAILED'
pip_rc=${PIPESTATUS[0]}
set -o pipefail
if [ "$pip_rc" != 0 ]; then echo "build failed (pip exit $pip_rc): the full log is $build_dir.log" >&2; tail -30 "$root/$build_dir.log" >&2; exit 1; fi
"$py" -c "from executorch.extension.pybindings import portable_lib as p; print('portable_lib installed; output mode:', p._output_mode, '; CUDA build:', p._cuda_enabled())"
