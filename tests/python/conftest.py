"""Shared fixtures for the portable_lib tests.

ETRT_TEST_BLOCK_TORCH=1 makes `import torch` fail before the bindings load, to test the torch-free path on a machine
that has torch installed.
"""
import json
import os
import pathlib
import sys

if os.environ.get("ETRT_TEST_BLOCK_TORCH") == "1":
    sys.modules["torch"] = None  # `import torch` now raises ImportError

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = pathlib.Path(os.environ.get("ETRT_CORPUS_DIR", ROOT.parent / "shared" / "corpus"))
FIXTURES = ROOT / "tests" / "fixtures" / "exported"


@pytest.fixture(scope="session")
def portable_lib():
    from executorch.extension.pybindings import portable_lib as pl
    return pl


@pytest.fixture(scope="session")
def corpus():
    if not (CORPUS / "add.pte").exists():
        pytest.skip(f"shared corpus not found at {CORPUS} (set ETRT_CORPUS_DIR); upstream files are not committed")
    return CORPUS


@pytest.fixture(scope="session")
def manifest():
    return json.loads((FIXTURES / "manifest.json").read_text())


def to_numpy(x):
    """An output as a NumPy array, in either output mode."""
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def torch_available():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False
