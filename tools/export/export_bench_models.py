"""Exports the models bench/ times (run with the export venv: .venv-export/bin/python).

Writes bench/models/{add_16m,linear_512,conv2d_resnet,softmax_rows,mm_64,mm_256,mm_1024}.pte with the real exporter; the files are
committed so a fresh clone can run bench/ without the exporter.
"""
import argparse
import pathlib

import torch
from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.exir.passes import MemoryPlanningPass


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(512, 512, bias=True)

    def forward(self, x):
        return self.fc(x)


class Conv(torch.nn.Module):
    """A ResNet-style 3x3 layer: 64 -> 64 channels on 56x56."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv(x)


class MatMul(torch.nn.Module):
    """a @ b of two inputs: the GEMM kernel alone (bench/run.py gemm)."""

    def forward(self, a, b):
        return a @ b


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


MODELS = {
    "add_16m": (Add(), (torch.randn(1 << 24), torch.randn(1 << 24))),
    "linear_512": (Linear(), (torch.randn(512, 512),)),
    "conv2d_resnet": (Conv(), (torch.randn(1, 64, 56, 56),)),
    "softmax_rows": (Softmax(), (torch.randn(256, 4096),)),
    **{f"mm_{n}": (MatMul(), (torch.randn(n, n), torch.randn(n, n))) for n in (64, 256, 1024)},
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[2] / "bench" / "models"))
    p.add_argument("--only", nargs="*", default=[])
    a = p.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for name, (model, args) in MODELS.items():
        if a.only and name not in a.only:
            continue
        model.eval()
        ep = torch.export.export(model, args, strict=False)
        # Inputs are not planned, so the runtime reads them in place: the benchmark times the kernel, not a copy.
        config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False))
        prog = to_edge_transform_and_lower(ep).to_executorch(config)
        (out / f"{name}.pte").write_bytes(prog.buffer)
        print("wrote", out / f"{name}.pte")


if __name__ == "__main__":
    main()
