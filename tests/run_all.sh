#!/usr/bin/env bash
# The whole test suite: the C++ runtime and kernel tests (Catch2, via meson test), then the Python tests (pytest)
# in every output mode: torch outputs, ExecuTorchResult outputs with torch installed, and torch blocked from import.
#
#   ./tests/run_all.sh                # everything (ETRT_FUZZ_SECONDS sets the fuzz budget, 60 by default)
#   ./tests/run_all.sh --python-only  # the pytest runs only (used after reinstalling the CUDA-enabled build)
#
# The GPU suite tests/test_pybindings_cuda_dlpack.py runs too; without a GPU it skips (set
# EXECUTORCH_PYBIND_TEST_REQUIRE_CUDA=1 to make a missing GPU a failure).
set -euo pipefail
python_only=0
[ "${1:-}" = "--python-only" ] && python_only=1
cd "$(dirname "$0")/.."
root=$(pwd)
if [ -z "${VIRTUAL_ENV:-}" ] && [ -x "$root/.venv/bin/python" ]; then
  # shellcheck disable=SC1091
  . "$root/.venv/bin/activate"
fi
py=$(command -v python)

if [ "$python_only" = 0 ]; then
  echo "== C++ tests (Catch2)"
  if [ ! -f build-tests/build.ninja ]; then
    meson setup build-tests -Dtests=true -Dbuildtype=release >/dev/null
  fi
  meson compile -C build-tests
  meson test -C build-tests --print-errorlogs
  # The fuzz target (libFuzzer + ASan + UBSan) for a short, fixed budget; any finding fails the suite.
  # ETRT_FUZZ_SECONDS=0 skips it; the long campaign is run by hand (tests/fuzz/run.sh 3600 -jobs=2).
  fuzz_seconds=${ETRT_FUZZ_SECONDS:-60}
  if [ "$fuzz_seconds" != 0 ]; then
    echo "== fuzz target (${fuzz_seconds}s)"
    ./tests/fuzz/run.sh "$fuzz_seconds"
  fi
fi

echo "== Python tests"
cd "$root/tests/python"   # not the checkout root, so `executorch` resolves to the installed package
has_torch=$("$py" -c "import importlib.util as u; print(1 if u.find_spec('torch') else 0)")
if [ "$has_torch" = 1 ]; then
  echo "-- output mode: torch (default with torch installed)"
  "$py" -m pytest -q -p no:cacheprovider .
  echo "-- output mode: executorch (EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=executorch)"
  EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=executorch "$py" -m pytest -q -p no:cacheprovider .
fi
echo "-- torch blocked from import"
ETRT_TEST_BLOCK_TORCH=1 "$py" -m pytest -q -p no:cacheprovider .

if [ "$python_only" = 0 ]; then
  echo "== stubs: stubtest against the installed runtime, mypy --strict on the README's examples"
  PYTHON="$py" "$root/tests/packaging/stubtest.sh"
  echo "== C++ embedding of the installed package (include flags only, selective build, pkg-config, CMake)"
  (cd "$root/tests/packaging" && "$py" -m pytest -q -p no:cacheprovider -s -rs test_cpp_embedding.py)
  # Beside the exporter from PyPI, both install orders (needs PyPI or a pip cache holding executorch 1.5.1 and
  # torch 2.13.0; ETRT_SKIP_COEXISTENCE=1 skips it on a machine without either).
  if [ "${ETRT_SKIP_COEXISTENCE:-0}" = 1 ]; then
    echo "== coexistence with the exporter: skipped (ETRT_SKIP_COEXISTENCE=1)"
  else
    echo "== coexistence with the exporter"
    "$root/tests/packaging/coexistence.sh"
  fi
fi

echo "== GPU suite (skips without a GPU)"
cd "$root/tests"
"$py" -m pytest -q -p no:cacheprovider -rs test_pybindings_cuda_dlpack.py
echo "-- its torch-free parts on the host-emulated device (ETRT_CUDA_SUITE_EMULATE=1)"
ETRT_CUDA_SUITE_EMULATE=1 "$py" -m pytest -q -p no:cacheprovider test_pybindings_cuda_dlpack.py
