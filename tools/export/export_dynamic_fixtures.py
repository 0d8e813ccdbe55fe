"""Dynamic-shape fixtures made with the real exporter (.venv-export): programs whose sizes are symbolic, so the
runtime evaluates shape arithmetic (aten::sym_size.int, executorch_prim::*) and views (et_view) as it runs.

    .venv-export/bin/python tools/export/export_dynamic_fixtures.py   # writes tests/fixtures/dynamic/

For each program, NAME.pte and NAME.npz: for every case k, the inputs case{k}_in{i} and torch eager's outputs
case{k}_out{j}, at several sizes within the exported bounds.
"""
import pathlib

import numpy as np
import torch
from torch.export import Dim
from executorch.exir import to_edge_transform_and_lower

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "dynamic"


class SymReshape(torch.nn.Module):
    """The issue's example: a reshape whose size is computed from a symbolic batch."""

    def forward(self, x):
        y = x.reshape(x.shape[0] * 2, -1)
        return y * 2 + 1


class SymArith(torch.nn.Module):
    """Shape arithmetic of every kind the exporter emits as prim ops: //, %, -, max/min, float division."""

    def forward(self, x, y):
        n, m = x.shape[0], y.shape[0]
        b = torch.cat([x, y], dim=0)              # sizes add up
        c = b.reshape(-1, x.shape[1])
        s = c.sum(0) * (n % 3 + 1) - (n - 1)      # mod, add, sub on symbols used as scalars
        t = x.mean(0) * (n // 2) + m * 2          # floordiv, mul
        return s + t, c


class ItemDriven(torch.nn.Module):
    """A data-dependent size: item() feeds a narrow (aten::_local_scalar_dense and a checked unbacked symbol)."""

    def forward(self, x, k):
        n = k.item()
        torch._check(n >= 1)
        torch._check(n <= x.shape[0])
        return x[:n] * 3, x.sum() + n


def export(name, module, example, dynamic_shapes, cases):
    module.eval()
    ep = torch.export.export(module, example, dynamic_shapes=dynamic_shapes)
    prog = to_edge_transform_and_lower(ep).to_executorch()
    (OUT / f"{name}.pte").write_bytes(prog.buffer)
    arrays = {}
    for k, inputs in enumerate(cases):
        with torch.no_grad():
            outs = module(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        arrays.update({f"case{k}_in{i}": t.numpy() for i, t in enumerate(inputs)})
        arrays.update({f"case{k}_out{j}": t.numpy() for j, t in enumerate(outs)})
    np.savez(OUT / f"{name}.npz", **arrays)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    batch = Dim("batch", min=1, max=16)
    export("sym_reshape", SymReshape(), (torch.randn(4, 6),), ({0: batch},),
           [(torch.randn(n, 6),) for n in (4, 1, 7, 16)])
    n_dim, m_dim = Dim("n", min=2, max=12), Dim("m", min=1, max=8)
    export("sym_arith", SymArith(), (torch.randn(5, 3), torch.randn(2, 3)), ({0: n_dim}, {0: m_dim}),
           [(torch.randn(n, 3), torch.randn(m, 3)) for n, m in ((5, 2), (2, 1), (12, 8), (7, 3))])
    rows = Dim("rows", min=2, max=10)
    export("item_driven", ItemDriven(), (torch.randn(6, 4), torch.tensor(3)), ({0: rows}, None),
           [(torch.randn(r, 4), torch.tensor(k)) for r, k in ((6, 3), (10, 10), (2, 1), (9, 4))])
    print("wrote", sorted(p.name for p in OUT.iterdir()))


if __name__ == "__main__":
    main()
