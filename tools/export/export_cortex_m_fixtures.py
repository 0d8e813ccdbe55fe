#!/usr/bin/env python3
"""Exports small Cortex-M (CMSIS-NN flow) programs for tests/python/test_cortex_m.py.

Run with the export venv (torch + executorch 1.5.1 from PyPI):
    /work/main/.venv-export/bin/python tools/export/export_cortex_m_fixtures.py [--out tests/fixtures/cortex_m]

Each model goes through the wheel's own Cortex-M flow (as its backends/cortex_m/test/tester.py drives it):
CortexMQuantizer (prepare_pt2e / calibrate / convert_pt2e) -> export -> to_edge(cortex_m_edge_compile_config) ->
CortexMPassManager(target M55) -> to_executorch. NAME.pte is written with NAME.npz (inputs x0..., expected outputs
y0...) and an entry in manifest.json.

Expected outputs: upstream's pip runtime has no cortex_m kernels registered (checked below and recorded in the
manifest), so they come from the wheel's reference implementations: the lowered edge graph (cortex_m::* ops with
their CompositeExplicitAutograd Python implementations) run on the same inputs.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import types

# executorch.backends.arm.common.debug imports tosa_serializer at module level only for debug dumps; the Cortex-M
# passes import it transitively. It is not on PyPI's executorch dependency list, so stand in an empty module.
# module whose every attribute (and theirs, recursively) is a placeholder class.
_tosa_stub = types.ModuleType("tosa_serializer")


class _Placeholder(type):
    def __getattr__(cls, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(attr, (), {})


def _tosa_attr(attr: str):
    if attr.startswith("__"):
        raise AttributeError(attr)
    return _Placeholder(attr, (), {})


_tosa_stub.__getattr__ = _tosa_attr  # type: ignore[attr-defined]
sys.modules.setdefault("tosa_serializer", _tosa_stub)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config  # noqa: E402
from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager  # noqa: E402
from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer  # noqa: E402
from executorch.backends.cortex_m.target_config import CortexM, CortexMTargetConfig  # noqa: E402
from executorch.exir import to_edge  # noqa: E402
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


class KwsNet(torch.nn.Module):
    """A tiny DS-CNN keyword-spotting net: conv (padded) -> depthwise conv -> pointwise conv -> avg pool -> linear."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, (5, 3), stride=(2, 1), padding=(2, 1))
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = torch.nn.Conv2d(8, 12, 1)
        self.pool = torch.nn.AvgPool2d((5, 5))  # 25 taps: an odd count, the mean is never a rounding tie
        self.fc = torch.nn.Linear(12, 6)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        x = torch.relu(self.dw(x))
        x = torch.relu(self.pw(x))
        x = self.pool(x)
        return self.fc(torch.flatten(x, 1))


class AddMulNet(torch.nn.Module):
    """Elementwise: quantized_add, quantized_mul, maximum/minimum (clamp) and max pool."""

    def forward(self, a, b):
        s = a + b
        p = s * b
        p = torch.clamp(p, -1.5, 1.5)
        return torch.nn.functional.max_pool2d(p, 3, stride=1, padding=1)


class LinearSoftmaxNet(torch.nn.Module):
    """A classification head: quantized_linear then cortex_m::softmax along the last dimension."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        return torch.softmax(self.fc(x) * 3.0, dim=-1)


def make_inputs(shapes, seed):
    g = torch.Generator().manual_seed(seed)
    ts = ((torch.rand(s, generator=g) * 2 - 1) for s in shapes)
    return tuple(t.to(memory_format=torch.channels_last) if t.dim() == 4 else t for t in ts)


MODELS = {
    "kws_dscnn": (KwsNet, [(1, 1, 10, 5)]),
    "elementwise": (AddMulNet, [(1, 4, 6, 6), (1, 4, 6, 6)]),
    "linear_softmax": (LinearSoftmaxNet, [(2, 3, 16)]),
}


def lower(model, inputs):
    target = CortexMTargetConfig(cpu=CortexM.M55)
    ep = torch.export.export(model, inputs, strict=True)
    prepared = prepare_pt2e(ep.module(check_guards=False), CortexMQuantizer())
    for i in range(8):
        prepared(*make_inputs([t.shape for t in inputs], 1000 + i))
    prepared(*inputs)
    converted = convert_pt2e(prepared)
    ep2 = torch.export.export(converted, inputs, strict=True)  # as the wheel's test harness does
    edge = to_edge(ep2, compile_config=cortex_m_edge_compile_config())
    pm = CortexMPassManager(edge.exported_program(), target_config=target)
    edge._edge_programs["forward"] = pm.transform()
    return edge


def ops_of(pte: bytes) -> list[str]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    prog = deserialize_pte_binary(pte)
    prog = getattr(prog, "program", prog)
    return sorted({f"{o.name}.{o.overload}" if o.overload else o.name for p in prog.execution_plan for o in p.operators})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests/fixtures/cortex_m"))
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from executorch.extension.pybindings import portable_lib

    upstream_has = [n for n in portable_lib._get_operator_names() if n.startswith("cortex_m::")]
    import executorch.backends.cortex_m.ops as cortex_m_ops

    yaml_text = (pathlib.Path(list(cortex_m_ops.__path__)[0]) / "operators.yaml").read_text()  # a namespace package
    wheel_ops = sorted(line.split("func: ", 1)[1].split("(", 1)[0] for line in yaml_text.splitlines()
                       if line.startswith("- func: cortex_m::"))
    manifest = {"generator": "tools/export/export_cortex_m_fixtures.py", "executorch": "1.5.1",
                "torch": torch.__version__, "upstream_runtime_cortex_m_ops": upstream_has,
                "wheel_operators_yaml": wheel_ops, "fixtures": {}}
    for name, (ctor, shapes) in MODELS.items():
        torch.manual_seed(0)
        model = ctor().eval()
        inputs = make_inputs(shapes, 7)
        edge = lower(model, inputs)
        gm = edge.exported_program().module()
        with torch.no_grad():
            ref = gm(*inputs)
        ref = ref if isinstance(ref, (tuple, list)) else (ref,)
        prog = edge.to_executorch()
        pte = prog.buffer
        ops = ops_of(pte)
        assert any(o.startswith("cortex_m::") for o in ops), ops
        assert len(pte) < 200_000, len(pte)
        (out / f"{name}.pte").write_bytes(pte)
        arrays = {f"x{i}": t.contiguous().numpy() for i, t in enumerate(inputs)}
        arrays.update({f"y{i}": t.contiguous().numpy() for i, t in enumerate(ref)})
        np.savez(out / f"{name}.npz", **arrays)
        upstream = None
        if upstream_has:
            m = portable_lib._load_for_executorch_from_buffer(pte)
            upstream = [np.asarray(r) for r in m.forward(list(inputs))]
        manifest["fixtures"][name] = {
            "pte_bytes": len(pte), "operators": ops,
            "inputs": [list(t.shape) for t in inputs], "input_dim_order": "channels_last",
            "outputs": [{"shape": list(t.shape), "dtype": str(t.dtype)} for t in ref],
            "expected_from": "upstream runtime" if upstream is not None else
                             "wheel reference implementations (lowered edge graph run in torch)",
        }
        print(name, len(pte), ops)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
