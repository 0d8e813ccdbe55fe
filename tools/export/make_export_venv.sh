#!/usr/bin/env bash
# Create (or refresh) the developer venv used to export ExecuTorch test fixtures
# with the real upstream exporter.  Idempotent.
#
#   usage: tools/export/make_export_venv.sh [VENV_DIR]   (default: <repo>/.venv-export)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$REPO_ROOT/.venv-export}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

TORCH_VERSION="2.13.0"
EXECUTORCH_VERSION="1.5.1"
TORCHVISION_VERSION="0.28.0"  # the release paired with torch 2.13; the zoo sweep and bench/run.py xnnpack use its architectures

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi

# Already good?  (keeps re-runs fast and offline-friendly)
if "$VENV/bin/python" - "$TORCH_VERSION" "$EXECUTORCH_VERSION" "$TORCHVISION_VERSION" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
import torch, numpy  # noqa: F401
t = version("torch").split("+")[0]
e = version("executorch")
v = version("torchvision").split("+")[0]
sys.exit(0 if (t, e, v) == (sys.argv[1], sys.argv[2], sys.argv[3]) else 1)
PYEOF
then
  echo "export venv at $VENV is up to date"
  exit 0
fi

"$VENV/bin/python" -m pip install --upgrade pip wheel setuptools
# torch is pinned in the same command so executorch's requirements cannot pull
# in a different torch.
"$VENV/bin/python" -m pip install \
  "torch==${TORCH_VERSION}" \
  "executorch==${EXECUTORCH_VERSION}" \
  numpy
# Without its dependencies: they would replace the pinned CPU torch. Pillow is what its import needs besides torch.
"$VENV/bin/python" -m pip install --no-deps "torchvision==${TORCHVISION_VERSION}" pillow

"$VENV/bin/python" -c "import torch, executorch, numpy; from importlib.metadata import version; print('torch', torch.__version__, 'executorch', version('executorch'), 'numpy', numpy.__version__)"
