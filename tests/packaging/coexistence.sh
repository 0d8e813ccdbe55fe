#!/usr/bin/env bash
# This package beside the exporter from PyPI (executorch 1.5.1): both install orders, each one uninstalled, no file
# of either distribution overwritten (tests/packaging/check_coexistence.py), and upstream's own pybindings tests from
# the exporter's wheel run against this package.
#
#   tests/packaging/coexistence.sh          # run by tests/run_all.sh; needs PyPI (or the pip cache) for the exporter
#
# The wheel comes from the build directory the set-up script keeps (build/py), so nothing is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
if [ -n "${VIRTUAL_ENV:-}" ]; then build_py="$VIRTUAL_ENV/bin/python"; else build_py="$root/.venv/bin/python"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check() { (cd "$work" && "$work/venv/bin/python" "$root/tests/packaging/check_coexistence.py" "$1" "$root/tests/fixtures/exported"); }
pip_q() { "$work/venv/bin/python" -m pip "$@" -q --disable-pip-version-check 2>&1 | grep -v "^WARNING: Location" || true; }

echo "-- the wheel (from build/py)"
"$build_py" -m pip wheel -q . --no-build-isolation --no-deps -Cbuild-dir=build/py -w "$work/wheel" 2>&1 | grep -v "^WARNING: Location" || true
wheel=$(ls "$work"/wheel/executorch_portable_lib-*.whl)
"$build_py" -m venv "$work/venv"
echo "-- the exporter first (executorch==1.5.1, torch==2.13.0 from PyPI)"
pip_q install "executorch==1.5.1" "torch==2.13.0" pytest
echo "-- then this package"
pip_q install "$wheel"
check both
echo "-- this package uninstalled: the exporter's runtime is back, untouched"
pip_q uninstall -y executorch-portable-lib
check exporter
echo "-- this package first, then the exporter"
pip_q install "$wheel"
pip_q uninstall -y executorch
check ours
pip_q install --no-deps "executorch==1.5.1"
check both
echo "-- upstream's pybindings tests from the exporter's wheel, against this package"
tests=$("$work/venv/bin/python" -c "import executorch, os; print(os.path.join(list(executorch.__path__)[0], 'extension', 'pybindings', 'test'))")
# Upstream's two quantized-op tests fail in a pip environment for upstream's runtime too (their export needs the
# quantized kernels library built from source); every other test must pass.
(cd "$work" && "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$tests/test_pybindings.py" \
  "$tests/test_backend_pybinding.py" -k "not quantized" -W ignore::DeprecationWarning)
echo "coexistence: all states ok"
