"""Checks run inside a venv by tests/packaging/coexistence.sh: this package beside the exporter (`executorch` from PyPI).

    python check_coexistence.py STATE [FIXTURE_DIR]

STATE names what is installed: `both`, `ours` (exporter uninstalled) or `exporter` (this package uninstalled). Each
state checks that what is installed works and that no installed file of either distribution differs from what its
installer recorded (RECORD hashes), and that the two distributions own no path in common.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import pathlib
import sys

import numpy as np

OURS, EXPORTER = "executorch-portable-lib", "executorch"


def installed(dist: str) -> bool:
    try:
        md.distribution(dist)
        return True
    except md.PackageNotFoundError:
        return False


def check_records(dist: str) -> set[str]:
    """Every file the installer recorded for `dist` is present with its recorded hash; returns the paths."""
    d = md.distribution(dist)
    paths, bad = set(), []
    for f in d.files or []:
        paths.add(str(f))
        if not f.hash or f.hash.mode != "sha256":
            continue
        p = pathlib.Path(f.locate())
        if not p.exists():
            bad.append(f"{f}: missing")
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(p.read_bytes()).digest()).rstrip(b"=").decode()
        if digest != f.hash.value:
            bad.append(f"{f}: changed")
    assert not bad, f"{dist}: files differ from its RECORD: {bad[:10]}"
    return paths


def export_add() -> tuple[bytes, list, object]:
    import torch
    from executorch.exir import to_edge

    class AddMul(torch.nn.Module):
        def forward(self, x, y):
            return x * y + x

    inputs = (torch.randn(3, 4), torch.randn(3, 4))
    program = to_edge(torch.export.export(AddMul(), inputs)).to_executorch()
    return program.buffer, list(inputs), AddMul()(*inputs)


def check_ours(fixtures: pathlib.Path) -> None:
    from executorch.extension.pybindings import data_loader, portable_lib

    assert portable_lib.__name__ == "executorch_portable_lib.portable_lib", portable_lib.__name__
    assert data_loader.PyDataLoader.from_path, "PyDataLoader.from_path"
    z = np.load(fixtures / "add.npz")
    ins = [z[k] for k in sorted(k for k in z.files if k.startswith("in"))]
    outs = portable_lib._load_for_executorch(str(fixtures / "add.pte")).forward(ins)
    np.testing.assert_allclose(np.asarray(outs[0]), ins[0] + ins[1], rtol=1e-6)
    from executorch.runtime import Runtime

    assert Runtime.__module__ == "executorch_portable_lib.runtime", Runtime.__module__
    loader = data_loader.PyDataLoader.from_path(str(fixtures / "add.pte"))
    outs = portable_lib._load_for_executorch_from_data_loader(loader).forward(ins)
    np.testing.assert_allclose(np.asarray(outs[0]), ins[0] + ins[1], rtol=1e-6)


def check_exporter_with(portable_lib) -> None:
    buf, ins, want = export_add()
    got = portable_lib._load_for_executorch_from_buffer(buf).forward(ins)
    np.testing.assert_allclose(np.asarray(got[0]), want.numpy(), rtol=1e-6, atol=1e-6)


def main() -> int:
    state = sys.argv[1]
    fixtures = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else pathlib.Path(__file__).parents[1] / "fixtures/exported"
    want_ours, want_exporter = state in ("both", "ours"), state in ("both", "exporter")
    assert installed(OURS) == want_ours, f"{OURS} installed: {installed(OURS)}"
    assert installed(EXPORTER) == want_exporter, f"{EXPORTER} installed: {installed(EXPORTER)}"
    owned = [check_records(d) for d, on in ((OURS, want_ours), (EXPORTER, want_exporter)) if on]
    if len(owned) == 2:
        shared = sorted(p for p in owned[0] & owned[1] if not p.endswith(".pyc"))
        assert not shared, f"paths owned by both distributions: {shared[:10]}"
    if want_ours:
        check_ours(fixtures)
    if want_exporter:
        from executorch.extension.pybindings import portable_lib

        if want_ours:  # one process: the exporter exports, this package runs
            assert portable_lib.__name__ == "executorch_portable_lib.portable_lib"
        else:  # the exporter's own runtime, untouched
            assert pathlib.Path(portable_lib.__file__).parent.name == "pybindings", portable_lib.__file__
            assert not hasattr(portable_lib, "_output_mode"), "this package's module is still served"
        check_exporter_with(portable_lib)
    print(f"coexistence [{state}]: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
