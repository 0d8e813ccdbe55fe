#!/usr/bin/env bash
# Checks the installed stubs of the upstream names against the installed runtime with mypy's stubtest (allowlist:
# tests/packaging/stubtest_allowlist.txt, each entry with its reason), then type-checks a user script that uses the
# README's Python examples (tests/packaging/readme_usage.py) with mypy --strict.
#
#   tests/packaging/stubtest.sh        # run by tests/run_all.sh; needs mypy (install_executorch.sh installs it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The partial stub package as a stub tree mypy reads from MYPYPATH (the parents are empty: partial stubs).
stubs=$("$py" -c "import sysconfig, os; print(os.path.join(sysconfig.get_paths()['purelib'], 'executorch-stubs'))")
mkdir -p "$work/executorch/extension/pybindings"
cp "$stubs"/extension/pybindings/*.pyi "$work/executorch/extension/pybindings/"
mkdir -p "$work/executorch/runtime" && cp "$stubs"/runtime/__init__.pyi "$work/executorch/runtime/"
touch "$work/executorch/__init__.pyi" "$work/executorch/extension/__init__.pyi" \
  "$work/executorch/extension/pybindings/__init__.pyi"
cd "$work"
MYPYPATH="$work" "$py" -m mypy.stubtest --allowlist "$here/stubtest_allowlist.txt" \
  executorch.extension.pybindings.portable_lib executorch.extension.pybindings.data_loader executorch.runtime
MYPYPATH="$work" "$py" -m mypy --strict --no-error-summary --cache-dir "$work/.mypy_cache" "$here/readme_usage.py"
"$py" "$here/readme_usage.py" "$here/../fixtures/exported" >/dev/null
echo "stubtest and mypy: ok"
