#!/usr/bin/env bash
# Builds and installs the package on each CPython given (default: every python3.10 and newer this machine has, on
# PATH or under ~/.pyenv/versions), each in its own venv and build directory, then imports it and runs the fixture
# tests with NumPy inputs (torch is not installed in these venvs, so outputs are ExecuTorchResult).
#
#   tests/packaging/multi_python.sh                      # every CPython >= 3.10 found
#   tests/packaging/multi_python.sh /usr/bin/python3.12  # the interpreters given
#
# Run by hand, not by CI: each version is a full build of the extension (about 10 minutes on 2 cores). The venvs
# and build directories are kept under build/multi-python, so a re-run rebuilds only what changed. Needs PyPI (or a
# pip cache) for meson, meson-python, ninja, pybind11, numpy and pytest.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
work="$root/build/multi-python"
mkdir -p "$work"

interpreters=("$@")
if [ ${#interpreters[@]} -eq 0 ]; then
  declare -A seen=()
  for cand in python3.{10,11,12,13,14} "$HOME"/.pyenv/versions/3.*/bin/python3; do
    exe=$(command -v "$cand" 2>/dev/null) || continue
    ver=$("$exe" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
    case "$ver" in 3.1[0-9]) ;; *) continue ;; esac
    [ -n "${seen[$ver]:-}" ] && continue
    seen[$ver]=1
    interpreters+=("$exe")
  done
fi
[ ${#interpreters[@]} -gt 0 ] || { echo "multi_python.sh: no CPython >= 3.10 found" >&2; exit 2; }

summary=()
failed=0
for exe in "${interpreters[@]}"; do
  ver=$("$exe" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
  short=${ver%.*}
  venv="$work/venv-$short"
  log="$work/build-$short.log"
  echo "== CPython $ver ($exe)"
  [ -x "$venv/bin/python" ] || "$exe" -m venv "$venv"
  py="$venv/bin/python"
  # (pip's warnings about index locations this machine's configuration names but does not have are dropped)
  "$py" -m pip install -q meson meson-python ninja pybind11 numpy pytest "tomli; python_version < '3.11'" 2>&1 \
    | { grep -v "^WARNING: Location" || true; }
  start=$(date +%s)
  if ! "$py" -m pip install -v . --no-build-isolation --config-settings=build-dir="build/multi-python/build-$short" >"$log" 2>&1; then
    echo "   build FAILED: $log" >&2
    tail -20 "$log" >&2
    summary+=("$ver: build failed ($log)")
    failed=1
    continue
  fi
  built=$(( $(date +%s) - start ))
  if ! "$py" -c "from executorch.extension.pybindings import portable_lib as p; import executorch_portable_lib as e; \
print('   imported; output mode', p._output_mode, '; headers at', e.get_include())"; then
    summary+=("$ver: import failed")
    failed=1
    continue
  fi
  # The fixture tests (every exported fixture against its stored expectation) and the seed's contract, from the
  # tests folder so that `executorch` resolves to the installed package.
  if (cd "$root/tests/python" && ETRT_TEST_BLOCK_TORCH=1 "$py" -m pytest -q -p no:cacheprovider \
        test_fixtures.py test_contract.py test_inputs.py test_outputs.py 2>&1 | tail -3 | tee "$work/tests-$short.log"); then
    result=$(tail -1 "$work/tests-$short.log")
    summary+=("$ver: built in ${built}s; $result")
    grep -qE '(failed|error)' "$work/tests-$short.log" && failed=1
  else
    summary+=("$ver: tests failed ($work/tests-$short.log)")
    failed=1
  fi
done

echo "== summary"
printf '   %s\n' "${summary[@]}"
exit "$failed"
