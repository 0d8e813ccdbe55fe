"""Fixtures for the reliability tests and the fuzz target, made with the real exporter (.venv-export).

    .venv-export/bin/python tools/export/export_reliability_fixtures.py   # writes tests/fixtures/reliability/

- bool_mask.pte: where(mask, x, y) with a bool input, so a bool input's bytes reach a kernel.
- program_data.pte + program_data.ptd: a Linear whose weights live in the .ptd (external_constants=True), so the
  fuzz target can feed mutated data files to a program that reads them.
Each has an .npz with the inputs (in0, in1, ...) and torch eager's outputs (out0, ...).
"""
import pathlib

import numpy as np
import torch
from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "reliability"


class BoolMask(torch.nn.Module):
    def forward(self, mask, x, y):
        return torch.where(mask, x, y) * 2


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def export(name, module, inputs, config=None):
    module.eval()
    ep = torch.export.export(module, inputs)
    prog = to_edge_transform_and_lower(ep).to_executorch(config or ExecutorchBackendConfig())
    (OUT / f"{name}.pte").write_bytes(prog.buffer)
    if config is not None and config.external_constants:
        prog.write_tensor_data_to_file(str(OUT))
        written = OUT / "_default_external_constant.ptd"
        if written.exists():
            written.rename(OUT / f"{name}.ptd")
    with torch.no_grad():
        outs = module(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    arrays = {f"in{i}": t.numpy() for i, t in enumerate(inputs)}
    arrays.update({f"out{i}": t.numpy() for i, t in enumerate(outs)})
    np.savez(OUT / f"{name}.npz", **arrays)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    export("bool_mask", BoolMask(), (torch.rand(3, 4) > 0.5, torch.randn(3, 4), torch.randn(3, 4)))
    export("program_data", Linear(), (torch.randn(2, 8),), ExecutorchBackendConfig(external_constants=True))
    print("wrote", sorted(p.name for p in OUT.iterdir()))


if __name__ == "__main__":
    main()
