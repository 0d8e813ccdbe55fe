#!/usr/bin/env python3
"""Export the project's test fixtures with the REAL upstream ExecuTorch exporter.

Run with the export venv (see tools/export/make_export_venv.sh):

    .venv-export/bin/python tools/export/export_fixtures.py [--out tests/fixtures/exported] [--only NAME ...]

For every fixture NAME it writes
    NAME.pte   the program
    NAME.bpte  a bundled program (2 test cases per method, expected = torch eager outputs)
    NAME.npz   test case 0 of the main method: in0, in1, ... and out0, out1, ...
               (bfloat16 stored as uint16 bit patterns; arrays are in logical
               index order, whatever the tensor's dim_order)
and a manifest.json describing everything (dtypes, shapes, dim orders, operators,
memory planning, export options, tolerances, versions).
"""
from __future__ import annotations

import argparse
import copy
import datetime
import hashlib
import json
import logging
import os
import platform
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from importlib.metadata import version as pkg_version
from typing import Any, Callable, Dict, List, Optional

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.export import Dim, export  # noqa: E402

from executorch.exir import (  # noqa: E402
    EdgeCompileConfig,
    ExecutorchBackendConfig,
    to_edge_transform_and_lower,
)
from executorch.exir import schema as et_schema  # noqa: E402
from executorch.exir.passes import MemoryPlanningPass  # noqa: E402
from executorch.devtools.bundled_program.config import (  # noqa: E402
    MethodTestCase,
    MethodTestSuite,
)
from executorch.devtools.bundled_program.core import BundledProgram  # noqa: E402
from executorch.devtools.bundled_program.serialize import (  # noqa: E402
    serialize_from_bundled_program_to_flatbuffer,
)

SEED = 20240607
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(REPO_ROOT, "tests", "fixtures", "exported")

TOL_EXACT = {"rtol": 0.0, "atol": 0.0}
TOL_F32 = {"rtol": 1e-5, "atol": 1e-6}
TOL_F32_LOOSE = {"rtol": 1e-4, "atol": 1e-5}
TOL_BF16 = {"rtol": 1e-2, "atol": 1e-2}


# --------------------------------------------------------------------------- #
# Fixture definitions
# --------------------------------------------------------------------------- #
@dataclass
class MethodSpec:
    module: torch.nn.Module
    # two test cases: list of input tuples. Case 0 is also the export example.
    cases: List[tuple]
    dynamic_shapes: Any = None
    # if True, the eager reference runs the cases sequentially on ONE copy of
    # the module (state carries over), as the runtime would.
    stateful: bool = False


@dataclass
class Fixture:
    name: str
    description: str
    methods: Callable[[], Dict[str, MethodSpec]]
    backend_config: Callable[[], ExecutorchBackendConfig] = lambda: ExecutorchBackendConfig()
    compile_config: Callable[[], Optional[EdgeCompileConfig]] = lambda: None
    export_options: Dict[str, Any] = field(default_factory=dict)
    tolerance: Dict[str, float] = field(default_factory=lambda: dict(TOL_F32))
    notes: List[str] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)
    main_method: str = "forward"


def rn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class AddMul(torch.nn.Module):
    def forward(self, x, y, z):
        return x * y + z


class TimesTwo(torch.nn.Module):
    def forward(self, x):
        return 2 * x


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class Stateful(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(3, dtype=torch.float32))

    def forward(self, x):
        self.state.add_(x)
        return self.state * 1.0


class IntOps(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 + y


class MeanWhere(torch.nn.Module):
    def forward(self, x):
        return torch.where(x.mean(dim=1) == 0, 1.1, x.mean(dim=1))


class MaxPool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.max_pool2d(x, 3, 2, 1)


class CnnSmall(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.relu = torch.nn.ReLU()
        self.pool = torch.nn.MaxPool2d(2)
        self.gap = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = self.gap(self.pool(self.relu(self.bn(self.conv(x)))))
        return self.fc(torch.flatten(x, 1))


class ScalarInputs(torch.nn.Module):
    def forward(self, x, a: int, b: float):
        return x * a + b


class ConvCL(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


class LayerNormGelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x):
        return torch.nn.functional.gelu(self.ln(x))


class DynCat(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y], 0)


def _eval(m):
    m.eval()
    return m


def _randomize_bn(bn: torch.nn.BatchNorm2d):
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn_like(bn.running_mean) * 0.1)
        bn.running_var.copy_(torch.rand_like(bn.running_var) + 0.5)
        bn.weight.copy_(torch.rand_like(bn.weight) + 0.5)
        bn.bias.copy_(torch.randn_like(bn.bias) * 0.1)
    return bn


def _cnn_small():
    m = CnnSmall()
    _randomize_bn(m.bn)
    return _eval(m)


class HandTransformerBlock(torch.nn.Module):
    """Pre-LN transformer block with plain ops: LayerNorm, q/k/v Linear, matmul+softmax attention, GELU MLP."""

    def __init__(self, d=32, heads=4, ff=64):
        super().__init__()
        self.h = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.o = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, ff)
        self.fc2 = torch.nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.h
        y = self.ln1(x)
        q = self.q(y).reshape(b, t, self.h, hd).transpose(1, 2)
        k = self.k(y).reshape(b, t, self.h, hd).transpose(1, 2)
        v = self.v(y).reshape(b, t, self.h, hd).transpose(1, 2)
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (1.0 / hd ** 0.5), dim=-1)
        a = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.o(a)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class EmbeddingModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 16)
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, tok):
        return self.fc(self.emb(tok).mean(dim=1))


class CnnZoo(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool1 = torch.nn.MaxPool2d(2)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=1, padding=1)
        self.pool2 = torch.nn.AvgPool2d(2)
        self.gap = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool1(torch.relu(self.bn(self.conv1(x))))
        x = self.gap(self.pool2(torch.relu(self.conv2(x))))
        return self.fc(torch.flatten(x, 1))


class LstmStep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out, h, c


class GruStep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(8, 16, batch_first=True)

    def forward(self, x):
        out, h = self.gru(x)
        return out, h


class ExplicitQLinear(torch.nn.Module):
    """quantize -> dequantize (uint8 activations, int8 weights) around a float linear, then q/dq the output."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)
        with torch.no_grad():
            w = self.lin.weight
            self.w_scale = float(w.abs().max()) / 127.0
            self.register_buffer("wq", torch.clamp(torch.round(w / self.w_scale), -127, 127).to(torch.int8))

    def forward(self, x):
        qd = torch.ops.quantized_decomposed
        xq = qd.quantize_per_tensor(x, 0.025, 128, 0, 255, torch.uint8)
        xd = qd.dequantize_per_tensor(xq, 0.025, 128, 0, 255, torch.uint8)
        wd = qd.dequantize_per_tensor(self.wq, self.w_scale, 0, -127, 127, torch.int8)
        y = torch.nn.functional.linear(xd, wd, self.lin.bias)
        yq = qd.quantize_per_tensor(y, 0.05, 128, 0, 255, torch.uint8)
        return qd.dequantize_per_tensor(yq, 0.05, 128, 0, 255, torch.uint8)


class InplaceInput(torch.nn.Module):
    """Mutates its user input in place, then returns a new tensor."""

    def forward(self, x):
        x.add_(1.0)
        return x * 2.0


class ConstantOutput(torch.nn.Module):
    """Returns (x + 1, self.const): the second output is a non-mutated buffer, i.e. a program constant."""

    def __init__(self):
        super().__init__()
        self.register_buffer("const", torch.randn(2, 3))

    def forward(self, x):
        return x + 1, self.const


class VisionResample(torch.nn.Module):
    """The resampling ops of segmentation / super-resolution / flow models: reflection and replication padding,
    transposed convolutions (grouped, strided, output_padding), nearest, bilinear and antialiased bilinear
    interpolation, pixel (un)shuffle and grid sampling; plus the 1-D forms on a second input."""

    def __init__(self):
        super().__init__()
        F = torch.nn
        self.pad_r = F.ReflectionPad2d((1, 2, 2, 1))
        self.pad_e = F.ReplicationPad2d(1)
        self.up = F.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.down = F.Conv2d(6, 8, 3, stride=2, padding=1)
        self.shuffle = F.PixelShuffle(2)
        self.unshuffle = F.PixelUnshuffle(2)
        self.up1d = F.ConvTranspose1d(4, 3, 4, stride=2, padding=1, dilation=1)
        self.pad1d_r = F.ReflectionPad1d((2, 3))
        self.pad1d_e = F.ReplicationPad1d(2)

    def forward(self, x, seq, grid):
        fn = torch.nn.functional
        y = self.up(self.pad_e(self.pad_r(x)))                                   # [2,6,32,32]
        n1 = fn.interpolate(y, scale_factor=0.5, mode="nearest")                 # [2,6,16,16]
        n2 = fn.interpolate(x, size=(20, 17), mode="nearest")                    # non-integer ratio
        b1 = fn.interpolate(n1, size=(24, 24), mode="bilinear", align_corners=False)
        b2 = fn.interpolate(n1, scale_factor=1.5, mode="bilinear", align_corners=True)
        aa = fn.interpolate(y, size=(11, 13), mode="bilinear", antialias=True)
        ps = self.unshuffle(self.shuffle(self.down(y)))                          # [2,8,16,16]
        gs = fn.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        gn = fn.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True)
        s = self.up1d(self.pad1d_e(self.pad1d_r(seq)))
        return b1, b2, aa, ps, n2, gs, gn, s


class SelectMath(torch.nn.Module):
    """Selection and math ops of detection heads, metric learning and sequence models: topk, index_put,
    diagonal, unfold, cdist, var, pow with a scalar base, rounding division, inverse
    hyperbolic functions."""

    def forward(self, x, y):
        vals, idx = torch.topk(x, 3, dim=-1)
        lo, lo_idx = torch.topk(x, 2, dim=0, largest=False)
        z = x.clone()
        z[torch.tensor([0, 2]), torch.tensor([1, 3])] = torch.tensor([10.0, -10.0])
        d = torch.diagonal(x, offset=1)
        u = y.unfold(1, 3, 2)
        c = torch.cdist(x, y[:, :6])
        v = torch.var(x, dim=1, unbiased=True)
        p = torch.pow(2.0, x)
        q = torch.div(x * 7, 2.5, rounding_mode="floor") + torch.div(x * 7, 2.5, rounding_mode="trunc")
        h = torch.asinh(x) + torch.acosh(1.0 + x.abs()) + torch.atanh(torch.tanh(x) * 0.9)
        return vals, idx, lo, lo_idx, z, d, u, c, v, p, q, h


class BorderPads(torch.nn.Module):
    """Reflection and replication padding in 1-D, 2-D and 3-D, negative (cropping) pads, an int32 input and a
    channels-last input. The exporter decomposes these ops unless they are preserved, as a model that wants the
    kernels (faster than the index decomposition) does with EdgeCompileConfig(preserve_ops=...)."""

    def __init__(self):
        super().__init__()
        F = torch.nn
        self.r1, self.e1 = F.ReflectionPad1d((2, 3)), F.ReplicationPad1d((4, 1))
        self.r2, self.e2 = F.ReflectionPad2d((1, 2, 2, 1)), F.ReplicationPad2d((3, 0, 1, 2))
        self.r3, self.e3 = F.ReflectionPad3d((1, 1, 2, 0, 1, 1)), F.ReplicationPad3d((2, 1, 0, 1, 1, 2))

    def forward(self, x, seq, vol, xi):
        aten = torch.ops.aten
        return (self.r1(seq), self.e1(seq[0]), self.r2(x), self.e2(x[0]), self.r3(vol), self.e3(vol[0]),
                aten.reflection_pad2d(x, [-1, 2, 1, -2]), aten.replication_pad2d(xi, [2, 1, 0, 3]),
                self.r2(x.to(memory_format=torch.channels_last)) * 2)


def _preserve_pads() -> EdgeCompileConfig:
    aten = torch.ops.aten
    return EdgeCompileConfig(preserve_ops=[aten.reflection_pad1d.default, aten.reflection_pad2d.default,
                                           aten.reflection_pad3d.default, aten.replication_pad1d.default,
                                           aten.replication_pad2d.default, aten.replication_pad3d.default])


def _pads_case():
    return (rn(2, 4, 6, 7), rn(2, 4, 9), rn(2, 3, 4, 5, 6), torch.randint(-50, 50, (2, 3, 4, 5), dtype=torch.int32))


def _mlp():
    return _eval(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)))


def _transformer_block():
    return _eval(torch.nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0))


def _cnn_zoo():
    m = CnnZoo()
    _randomize_bn(m.bn)
    return _eval(m)


def _load_quantized_out_variants():
    """Registers the quantized_decomposed::*.out variants that to_executorch needs."""
    import executorch.kernels.quantized  # noqa: F401, PLC0415


def _explicit_qlinear():
    _load_quantized_out_variants()
    return _eval(ExplicitQLinear())


def _pt2e_quantized_linear():
    """Linear(8,4) quantized with PT2E (XNNPACKQuantizer, static per-tensor), NOT lowered to a delegate:
    the quantized_decomposed q/dq ops stay in the portable graph."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (  # noqa: PLC0415
        XNNPACKQuantizer, get_symmetric_quantization_config)
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: PLC0415

    _load_quantized_out_variants()
    m = _eval(torch.nn.Linear(8, 4))
    ex = (torch.randn(2, 8),)
    gm = export(m, ex, strict=False).module()
    q = XNNPACKQuantizer()
    q.set_global(get_symmetric_quantization_config(is_per_channel=False))
    gm = prepare_pt2e(gm, q)
    for _ in range(4):
        gm(torch.randn(2, 8))
    gm = convert_pt2e(gm)
    return gm


def _zero_mean_case():
    x = torch.randn(3, 4)
    x[1] = torch.tensor([1.0, -1.0, 2.0, -2.0])  # mean exactly 0 -> where picks 1.1
    return x


FIXTURES: List[Fixture] = [
    Fixture(
        "add", "forward(x, y) = x + y, float32 [2,3]",
        lambda: {"forward": MethodSpec(Add(), [(rn(2, 3), rn(2, 3)), (rn(2, 3), rn(2, 3))])},
    ),
    Fixture(
        "add_mul", "forward(x, y, z) = x*y + z, float32 [2,2] (alpha-less add)",
        lambda: {"forward": MethodSpec(AddMul(), [tuple(rn(2, 2) for _ in range(3)) for _ in range(2)])},
    ),
    Fixture(
        "linear", "torch.nn.Linear(4, 3) on [2,4] float32 (weights are constants)",
        lambda: {"forward": MethodSpec(_eval(torch.nn.Linear(4, 3)), [(rn(2, 4),), (rn(2, 4),)])},
    ),
    Fixture(
        "mlp", "Linear(16,32)-ReLU-Linear(32,8) on [4,16]",
        lambda: {"forward": MethodSpec(
            _eval(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))),
            [(rn(4, 16),), (rn(4, 16),)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "two_methods", "two methods: forward(x, y) = x + y; times_two(x) = 2*x; float32 [2,3]",
        lambda: {
            "forward": MethodSpec(Add(), [(rn(2, 3), rn(2, 3)), (rn(2, 3), rn(2, 3))]),
            "times_two": MethodSpec(TimesTwo(), [(rn(2, 3),), (rn(2, 3),)]),
        },
    ),
    Fixture(
        "softmax_last", "torch.softmax(x, dim=-1) on [3,10]",
        lambda: {"forward": MethodSpec(Softmax(), [(rn(3, 10),), (rn(3, 10),)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "stateful",
        "mutable buffer `state` float32 [3] zeros; forward(x): state.add_(x); return state * 1.0",
        lambda: {"forward": MethodSpec(
            Stateful(), [(torch.ones(3),), (torch.ones(3),)], stateful=True)},
        backend_config=lambda: ExecutorchBackendConfig(emit_mutable_buffer_names=True),
        export_options={"emit_mutable_buffer_names": True},
        notes=[
            "State persists across executions of one loaded method: calling forward twice "
            "with x = ones(3) returns ones(3) after the first call and 2*ones(3) after the second.",
            "The bundled test cases are sequential: case 0 (x=ones) expects ones, case 1 "
            "(x=ones) expects 2*ones, valid only if run in order on the same loaded method.",
            "The npz holds case 0 (first call on a fresh method): in0 = ones, out0 = ones.",
        ],
        extra={"sequential_expectation": {
            "input": [1.0, 1.0, 1.0], "calls": 2, "output_after_calls": [2.0, 2.0, 2.0]}},
    ),
    Fixture(
        "add_no_input_planning", "add of [2,3], memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)",
        lambda: {"forward": MethodSpec(Add(), [(rn(2, 3), rn(2, 3)), (rn(2, 3), rn(2, 3))])},
        backend_config=lambda: ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)),
        export_options={"memory_planning_pass": {"alloc_graph_input": False, "alloc_graph_output": True}},
    ),
    Fixture(
        "add_no_output_planning", "add of [2,3], memory_planning_pass=MemoryPlanningPass(alloc_graph_output=False)",
        lambda: {"forward": MethodSpec(Add(), [(rn(2, 3), rn(2, 3)), (rn(2, 3), rn(2, 3))])},
        backend_config=lambda: ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(alloc_graph_output=False)),
        export_options={"memory_planning_pass": {"alloc_graph_input": True, "alloc_graph_output": False}},
        notes=["The output is not memory planned: the caller must provide its storage "
               "(set_output_data_ptr) before execute."],
        extra={"upstream_known_issues": {"bundled": "executorch 1.5.1 BundledModule."
               "verify_result_with_bundled_expected_output segfaults: it never provides "
               "storage for the unplanned output. Plain run_method works."}},
    ),
    Fixture(
        "int_ops", "forward(x:int32[4], y:int64[4]) = x*2 + y (promotes to int64)",
        lambda: {"forward": MethodSpec(IntOps(), [
            (torch.randint(-100, 100, (4,), dtype=torch.int32), torch.randint(-1000, 1000, (4,), dtype=torch.int64))
            for _ in range(2)])},
        tolerance=dict(TOL_EXACT),
    ),
    Fixture(
        "mean_where", "forward(x) = where(x.mean(1) == 0, 1.1, x.mean(1)) on [3,4]",
        lambda: {"forward": MethodSpec(MeanWhere(), [(_zero_mean_case(),), (_zero_mean_case(),)])},
        notes=["Row 1 of every test input has mean exactly 0, so out[1] == 1.1 (as float32)."],
    ),
    Fixture(
        "maxpool", "max_pool2d(x, 3, 2, 1) on [1,4,16,16]",
        lambda: {"forward": MethodSpec(MaxPool(), [(rn(1, 4, 16, 16),), (rn(1, 4, 16, 16),)])},
        tolerance=dict(TOL_EXACT),
    ),
    Fixture(
        "cnn_small",
        "Conv2d(3,8,3,p=1)-BatchNorm2d(8,eval)-ReLU-MaxPool2d(2)-AdaptiveAvgPool2d(1)-flatten-Linear(8,5) on [2,3,16,16]",
        lambda: {"forward": MethodSpec(_cnn_small(), [(rn(2, 3, 16, 16),), (rn(2, 3, 16, 16),)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "scalar_inputs", "forward(x: float32[2,3], a: int = 3, b: float = 0.5) = x*a + b",
        lambda: {"forward": MethodSpec(ScalarInputs(), [(rn(2, 3), 3, 0.5), (rn(2, 3), 3, 0.5)])},
        notes=["torch.export specializes the int/float inputs to the example values (3, 0.5); "
               "the runtime must be fed the same values (see program inputs in the manifest)."],
    ),
    Fixture(
        "bf16_add", "add on bfloat16 [4]",
        lambda: {"forward": MethodSpec(Add(), [(rn(4, dtype=torch.bfloat16), rn(4, dtype=torch.bfloat16))
                                                 for _ in range(2)])},
        tolerance=dict(TOL_BF16),
    ),
    Fixture(
        "channels_last", "Conv2d(3,4,3,p=1)+ReLU; example input [1,3,8,8] in channels_last memory format",
        lambda: {"forward": MethodSpec(_eval(ConvCL()), [
            (rn(1, 3, 8, 8).to(memory_format=torch.channels_last),) for _ in range(2)])},
        tolerance=dict(TOL_F32_LOOSE),
        notes=["npz arrays are in logical NCHW index order; the runtime tensor's dim_order is "
               "given in the manifest (data must be laid out in that order).",
               "The bundled test tensors are stored contiguous (dim_order [0,1,2,3], NCHW bytes), "
               "unlike the method's input/output tensors (dim_order [0,2,3,1])."],
        extra={"upstream_known_issues": {"bundled": "executorch 1.5.1 aborts in "
               "bundled_program.cpp tensors_are_close(): bundled expected output strides "
               "(contiguous) != method output strides (channels-last). Plain run_method works."}},
    ),
    Fixture(
        "layer_norm_gelu", "LayerNorm(16) then gelu on [2,5,16]",
        lambda: {"forward": MethodSpec(_eval(LayerNormGelu()), [(rn(2, 5, 16),), (rn(2, 5, 16),)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "dynamic_cat", "forward(x, y) = cat([x, y], 0), x,y: [b,3] with b = Dim('b', min=1, max=8)",
        lambda: {"forward": MethodSpec(
            DynCat(), [(rn(2, 3), rn(2, 3)), (rn(5, 3), rn(5, 3))],
            dynamic_shapes=(lambda b: ({0: b}, {0: b}))(Dim("b", min=1, max=8)))},
        notes=["Test case 0 uses b=2, test case 1 uses b=5. Tensor sizes stored in the "
               "program are the upper bounds (b=8); shape_dynamism is DYNAMIC_BOUND."],
        extra={"dynamic_dims": {"in0": {"0": {"name": "b", "min": 1, "max": 8}},
                                "in1": {"0": {"name": "b", "min": 1, "max": 8}},
                                "out0": {"0": {"expr": "2*b", "max": 16}}}},
    ),
    # ----------------------------------------------------------------- zoo
    Fixture(
        "transformer_block",
        "nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True, dropout=0), "
        "eval, on [2,8,32]",
        lambda: {"forward": MethodSpec(_transformer_block(), [(rn(2, 8, 32),), (rn(2, 8, 32),)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "transformer_block_hand",
        "hand-written pre-LN block: LayerNorm, q/k/v Linear, matmul+softmax attention (4 heads), "
        "out Linear, residual, LayerNorm, Linear(32,64)-GELU-Linear(64,32), residual; on [2,8,32]",
        lambda: {"forward": MethodSpec(_eval(HandTransformerBlock()), [(rn(2, 8, 32),), (rn(2, 8, 32),)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "lstm_step", "nn.LSTM(8, 16, batch_first=True) on [1,5,8]; returns (out, h_n, c_n)",
        lambda: {"forward": MethodSpec(_eval(LstmStep()), [(rn(1, 5, 8),), (rn(1, 5, 8),)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "gru_step", "nn.GRU(8, 16, batch_first=True) on [1,5,8]; returns (out, h_n)",
        lambda: {"forward": MethodSpec(_eval(GruStep()), [(rn(1, 5, 8),), (rn(1, 5, 8),)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "embedding_model", "nn.Embedding(100,16) -> mean over dim 1 -> Linear(16,4); int64 tokens [2,7]",
        lambda: {"forward": MethodSpec(_eval(EmbeddingModel()), [
            (torch.randint(0, 100, (2, 7), dtype=torch.int64),) for _ in range(2)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "cnn_zoo",
        "Conv2d(3,8,3,p=1)-BatchNorm2d(eval)-ReLU-MaxPool2d(2)-Conv2d(8,16,3,p=1)-ReLU-AvgPool2d(2)-"
        "AdaptiveAvgPool2d(1)-flatten-Linear(16,10) on [1,3,32,32]",
        lambda: {"forward": MethodSpec(_cnn_zoo(), [(rn(1, 3, 32, 32),), (rn(1, 3, 32, 32),)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "mlp_fp16", "the mlp fixture's model (Linear(16,32)-ReLU-Linear(32,8)) in float16 on [4,16]",
        lambda: {"forward": MethodSpec(_mlp().to(torch.float16), [
            (rn(4, 16, dtype=torch.float16),), (rn(4, 16, dtype=torch.float16),)])},
        tolerance=dict(TOL_BF16),
        notes=["Eager reference computed by torch CPU in float16 (which accumulates in float32)."],
    ),
    Fixture(
        "mlp_bf16", "the mlp fixture's model (Linear(16,32)-ReLU-Linear(32,8)) in bfloat16 on [4,16]",
        lambda: {"forward": MethodSpec(_mlp().to(torch.bfloat16), [
            (rn(4, 16, dtype=torch.bfloat16),), (rn(4, 16, dtype=torch.bfloat16),)])},
        tolerance={"rtol": 2e-2, "atol": 2e-2},
        notes=["Eager reference computed by torch CPU in bfloat16 (which accumulates in float32)."],
        extra={"upstream_known_issues": {"bundled": "executorch 1.5.1 bundled verification compares "
               "bfloat16 outputs bit-exactly whatever rtol/atol (fails with status 32 even at atol=1e6); "
               "upstream's bf16 addmm differs from torch eager in the last bit for some elements "
               "(max |err| ~6e-3, within tolerance). Plain run_method is within tolerance."}},
    ),
    Fixture(
        "mlp_no_output_planning", "mlp model on [4,16], MemoryPlanningPass(alloc_graph_output=False)",
        lambda: {"forward": MethodSpec(_mlp(), [(rn(4, 16),), (rn(4, 16),)])},
        backend_config=lambda: ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(alloc_graph_output=False)),
        export_options={"memory_planning_pass": {"alloc_graph_input": True, "alloc_graph_output": False}},
        tolerance=dict(TOL_F32_LOOSE),
        notes=["The output is not memory planned: the caller must provide its storage "
               "(set_output_data_ptr) before execute."],
        extra={"upstream_known_issues": {"bundled": "executorch 1.5.1 BundledModule."
               "verify_result_with_bundled_expected_output segfaults: it never provides "
               "storage for the unplanned output. Plain run_method works."}},
    ),
    Fixture(
        "mlp_no_input_planning", "mlp model on [4,16], MemoryPlanningPass(alloc_graph_input=False)",
        lambda: {"forward": MethodSpec(_mlp(), [(rn(4, 16),), (rn(4, 16),)])},
        backend_config=lambda: ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)),
        export_options={"memory_planning_pass": {"alloc_graph_input": False, "alloc_graph_output": True}},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "quantized_linear",
        "Linear(8,4) on [2,8] quantized by PT2E (XNNPACKQuantizer symmetric per-tensor static, "
        "prepare_pt2e/convert_pt2e, 4 calibration batches), NOT delegated: "
        "quantized_decomposed q/dq ops stay in the portable graph",
        lambda: {"forward": MethodSpec(_pt2e_quantized_linear(), [(rn(2, 8),), (rn(2, 8),)])},
        tolerance={"rtol": 1e-3, "atol": 1e-3},
        notes=["Eager reference = the converted (q/dq) GraphModule run by torch, so rounding matches "
               "exactly except for ties; tolerance allows one quantization step only in rare cases."],
    ),
    Fixture(
        "quantized_linear_explicit",
        "explicit quantized_decomposed.quantize_per_tensor/dequantize_per_tensor (uint8 activations, "
        "int8 weight buffer) around a float linear(8->4), on [2,8]",
        lambda: {"forward": MethodSpec(_explicit_qlinear(), [(rn(2, 8),), (rn(2, 8),)])},
        tolerance={"rtol": 1e-3, "atol": 1e-3},
    ),
    # ----------------------------------------------------------------- aliasing / mutation
    Fixture(
        "inplace_input_unplanned",
        "forward(x): x.add_(1.0); return x * 2.0 on float32 [4], MemoryPlanningPass(alloc_graph_input=False)",
        lambda: {"forward": MethodSpec(InplaceInput(), [(rn(4),), (rn(4),)])},
        backend_config=lambda: ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)),
        export_options={"memory_planning_pass": {"alloc_graph_input": False, "alloc_graph_output": True}},
        notes=[
            "torch.export(strict=False) accepts the in-place mutation of the user input; to_edge "
            "functionalizes it into an output of kind USER_INPUT_MUTATION (target 'x').",
            "Operators: aten::add.out, aten::mul.out, aten::copy.out, aten::copy_ (overload ''). "
            "Kernel calls: add.out(x, 1.0, alpha=1, out=t) ; mul.out(t, 2.0, out=y) ; "
            "copy.out(x, t, non_blocking=False, out=c) ; copy_(x, c, non_blocking=False): the program "
            "writes x + 1 back into the input value itself.",
            "The input x is NOT memory planned (no allocation_info, data_buffer_idx 0): the caller's "
            "storage is used directly, so the write-back updates the caller's buffer in place.",
            "The method has 2 outputs: out0 is the input value itself (same value index as input 0, "
            "= x + 1 after execute), out1 = (x + 1) * 2 (planned). The npz and bundled expected "
            "outputs follow that order: out0 = mutated input, out1 = returned tensor.",
        ],
    ),
    Fixture(
        "inplace_input_planned",
        "forward(x): x.add_(1.0); return x * 2.0 on float32 [4], default memory planning",
        lambda: {"forward": MethodSpec(InplaceInput(), [(rn(4),), (rn(4),)])},
        notes=[
            "Same module and program as inplace_input_unplanned (ops add.out, mul.out, copy.out, copy_; "
            "copy_(x, c) writes x + 1 back into the input value), but the input x is memory planned "
            "(allocation_info set): the runtime copies the caller's data into the arena, so the "
            "write-back lands in the arena and the caller's buffer is NOT updated.",
            "The method has 2 outputs: out0 is the input value itself (x + 1 after execute, in the "
            "arena), out1 = (x + 1) * 2.",
        ],
    ),
    Fixture(
        "constant_output",
        "forward(x) = (x + 1, self.const); const is a non-mutated buffer float32 [2,3]; x float32 [2,3]; "
        "MemoryPlanningPass(alloc_graph_output=False)",
        lambda: {"forward": MethodSpec(ConstantOutput(), [(rn(2, 3),), (rn(2, 3),)])},
        backend_config=lambda: ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(alloc_graph_output=False)),
        export_options={"memory_planning_pass": {"alloc_graph_input": True, "alloc_graph_output": False}},
        notes=[
            "Output 1 is the constant tensor itself (value index 0, data_buffer_idx 1, no allocation_info): "
            "its data lives in the program's constant segment (read-only). Output 0 (x + 1) is not "
            "memory planned: the caller must provide its storage (set_output_data_ptr) before execute.",
            "The scalar 1 becomes a constant int64 0-dim tensor converted with "
            "dim_order_ops::_to_dim_order_copy.out (into a planned 0-dim float tensor).",
        ],
        extra={"upstream_known_issues": {"bundled": "executorch 1.5.1 BundledModule."
               "verify_result_with_bundled_expected_output segfaults: it never provides "
               "storage for the unplanned output 0. Plain run_method works."}},
    ),
    # ----------------------------------------------------------------- operator coverage of real models
    Fixture(
        "vision_resample",
        "reflection/replication pad 1-D and 2-D, grouped strided ConvTranspose2d with output_padding, "
        "ConvTranspose1d, nearest (scale and size), bilinear (align_corners both ways), antialiased bilinear, "
        "pixel shuffle/unshuffle, grid_sample (bilinear/zeros, nearest/border); x [2,4,12,12], seq [2,4,16], "
        "grid [2,9,7,2]",
        lambda: {"forward": MethodSpec(_eval(VisionResample()), [
            (rn(2, 4, 12, 12), rn(2, 4, 16), torch.rand(2, 9, 7, 2) * 2.4 - 1.2),
            (rn(2, 4, 12, 12), rn(2, 4, 16), torch.rand(2, 9, 7, 2) * 2.4 - 1.2)])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "select_math",
        "topk (largest/smallest), index_put, diagonal, unfold, cdist, var, "
        "pow(2, x), floor/trunc division, asinh/acosh/atanh; x [4,6], y [4,7]",
        lambda: {"forward": MethodSpec(SelectMath(), [(rn(4, 6), rn(4, 7)), (rn(4, 6), rn(4, 7))])},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "border_pads",
        "reflection/replication pad 1-D, 2-D, 3-D kept as kernels with EdgeCompileConfig(preserve_ops=...), "
        "negative pads, int32 and channels-last inputs; x [2,4,6,7], seq [2,4,9], vol [2,3,4,5,6], xi int32 [2,3,4,5]",
        lambda: {"forward": MethodSpec(BorderPads(), [_pads_case(), _pads_case()])},
        compile_config=_preserve_pads,
        export_options={"edge_compile_config": "preserve_ops = the six reflection/replication pad ops"},
        extra={"upstream_known_issues": {"pte": "executorch 1.5.1's reflection_pad2d.out refuses the channels-last "
                                                "input (tensor_is_default_dim_order check, InvalidArgument 0x12); "
                                                "every other pad in this program runs and matches eager there",
                                         "bundled": "same as pte"}},
    ),
]


# Facts about the files produced by executorch 1.5.1 (checked when this script
# was written; the per-fixture data below is authoritative).
OBSERVATIONS = [
    "non_const_buffer_sizes[0] is always 0 (reserved); all planned tensors live in memory_id 1.",
    "Memory planning reuses offsets: an output may alias an input's storage (e.g. scalar_inputs: "
    "input x and output both at offset 0), so inputs are clobbered by execute().",
    "Programs with no constant data have NO extended header (eh00) but still list one segment "
    "{offset 0, size 0} and constant_segment {segment_index 0, offsets [0]}.",
    "Constant tensors live in segment 0 (constant_segment), not in constant_buffer (empty in the file); "
    "offsets[0] is the reserved empty entry for data_buffer_idx 0; tensor data is 16-byte aligned; "
    "segment_base_offset is 128-byte aligned.",
    "Operator overload may be empty: the mutable-buffer write-back is 'aten::copy_' (name 'aten::copy_', overload '').",
    "Python int scalars multiplied into float tensors become a constant int64 0-dim tensor followed by "
    "dim_order_ops::_to_dim_order_copy.out (see two_methods.times_two, int_ops, scalar_inputs).",
    "stateful: the buffer 'state' is a memory-planned tensor (not a method input) with no initial data "
    "(data_buffer_idx 0) and extra_tensor_info.fully_qualified_name 'state'; mutable_data_segments is empty. "
    "The planned arena must start zeroed for the documented outputs.",
    "dynamic_cat: tensor sizes in the program are the upper bounds, shape_dynamism DYNAMIC_BOUND.",
    "scalar_inputs: the int/float inputs appear as Int/Double EValues in the plan's inputs.",
    "Bundled programs (BP08) embed the .pte at offset 64 (force_align 32); bundled test tensors are always "
    "stored contiguous (dim_order 0..n-1).",
    "transformer_block (nn.TransformerEncoderLayer) exports with a NaN-guard on the attention weights "
    "(eq.Scalar_out/any.out/logical_not.out/full_like.out/where.self_out) and dim_order_ops::_clone_dim_order.out; "
    "the hand-written transformer_block_hand needs only bmm/_softmax/native_layer_norm/gelu/addmm/expand_copy.",
    "lstm_step/gru_step: nn.LSTM/nn.GRU decompose to plain aten ops (addmm, sigmoid, tanh, split_with_sizes_copy, "
    "slice/select/squeeze/unsqueeze copies, cat, full) unrolled over the 5 time steps.",
    "quantized_*: to_executorch needs the quantized_decomposed out variants registered "
    "(import executorch.kernels.quantized); upstream portable_lib alone cannot run these programs "
    "(OperatorMissing 0x14) unless that module is imported in the runtime process as well.",
    "inplace_input_*: an in-place mutation of a user input is functionalized into a USER_INPUT_MUTATION "
    "output placed before the user outputs; the plan's outputs list the input's own value index, and the "
    "program ends with copy.out + copy_ (overload '') writing the new value into the input value. Whether the "
    "caller's buffer sees it depends only on the input being memory planned (see manifest input_mutations).",
    "constant_output: a non-mutated buffer returned as-is is an output whose value is the constant tensor "
    "(data_buffer_idx > 0, no allocation_info); see manifest constant_outputs.",
]


# --------------------------------------------------------------------------- #
# Introspection helpers
# --------------------------------------------------------------------------- #
def _dtype_name(t: torch.dtype) -> str:
    return str(t).replace("torch.", "")


SCALAR_TYPE_TO_DTYPE = {
    "BYTE": "uint8", "CHAR": "int8", "SHORT": "int16", "INT": "int32", "LONG": "int64",
    "HALF": "float16", "FLOAT": "float32", "DOUBLE": "float64", "BOOL": "bool",
    "BFLOAT16": "bfloat16",
}


def _evalue_info(plan: et_schema.ExecutionPlan, idx: int) -> Dict[str, Any]:
    val = plan.values[idx].val
    info: Dict[str, Any] = {"value_index": idx, "kind": type(val).__name__}
    if isinstance(val, et_schema.Tensor):
        st = val.scalar_type.name if hasattr(val.scalar_type, "name") else str(val.scalar_type)
        info.update({
            "scalar_type": st,
            "dtype": SCALAR_TYPE_TO_DTYPE.get(st, st),
            "sizes": list(val.sizes),
            "dim_order": list(val.dim_order),
            "shape_dynamism": val.shape_dynamism.name,
            "memory_planned": val.allocation_info is not None,
            "constant": val.data_buffer_idx != 0,
        })
        if val.allocation_info is not None:
            a = val.allocation_info
            info["allocation"] = {
                "memory_id": a.memory_id,
                "offset": (a.memory_offset_high << 32) | a.memory_offset_low,
            }
        if val.extra_tensor_info is not None and val.extra_tensor_info.fully_qualified_name:
            info["fully_qualified_name"] = val.extra_tensor_info.fully_qualified_name
    elif isinstance(val, et_schema.Int):
        info["value"] = val.int_val
    elif isinstance(val, et_schema.Double):
        info["value"] = val.double_val
    elif isinstance(val, et_schema.Bool):
        info["value"] = val.bool_val
    return info


def _plan_info(plan: et_schema.ExecutionPlan) -> Dict[str, Any]:
    ops = []
    for op in plan.operators:
        ops.append(f"{op.name}.{op.overload}" if op.overload else op.name)
    n_instr = sum(len(c.instructions) for c in plan.chains)
    instr_kinds: Dict[str, int] = {}
    for c in plan.chains:
        for ins in c.instructions:
            k = type(ins.instr_args).__name__
            instr_kinds[k] = instr_kinds.get(k, 0) + 1
    mutable_buffers = []
    for i, v in enumerate(plan.values):
        t = v.val
        if isinstance(t, et_schema.Tensor) and t.extra_tensor_info is not None \
                and t.extra_tensor_info.fully_qualified_name:
            mutable_buffers.append({"value_index": i,
                                    "fully_qualified_name": t.extra_tensor_info.fully_qualified_name,
                                    "memory_planned": t.allocation_info is not None})
    return {
        "operators": ops,
        "inputs": [_evalue_info(plan, i) for i in plan.inputs],
        "outputs": [_evalue_info(plan, i) for i in plan.outputs],
        "non_const_buffer_sizes": list(plan.non_const_buffer_sizes),
        "num_values": len(plan.values),
        "num_instructions": n_instr,
        "instruction_kinds": instr_kinds,
        "num_delegates": len(plan.delegates),
        "named_tensors": mutable_buffers,
        "container_meta_type": {
            "encoded_inp_str": plan.container_meta_type.encoded_inp_str,
            "encoded_out_str": plan.container_meta_type.encoded_out_str,
        },
    }


def _file_layout(buf: bytes) -> Dict[str, Any]:
    """Layout of the serialized .pte as the runtime sees it (raw flatbuffer, segments not restored)."""
    from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program  # noqa: PLC0415

    program_size = len(buf)
    if buf[8:12] == b"eh00":
        program_size = int.from_bytes(buf[16:24], "little")
    program = _flatbuffer_to_program(buf[:program_size])
    out: Dict[str, Any] = {
        "size": len(buf),
        "file_identifier": buf[4:8].decode("latin1"),
        "root_offset": int.from_bytes(buf[0:4], "little"),
        "extended_header": None,
        "program_version": program.version,
        "num_segments": len(program.segments),
        "segments": [{"offset": s.offset, "size": s.size} for s in program.segments],
        "constant_buffer_entries": len(program.constant_buffer),
        "constant_segment": {
            "segment_index": program.constant_segment.segment_index,
            "num_offsets": len(program.constant_segment.offsets),
            "offsets": list(program.constant_segment.offsets),
        },
        "mutable_data_segments": (
            [{"segment_index": m.segment_index, "offsets": list(m.offsets)}
             for m in program.mutable_data_segments] if program.mutable_data_segments else []),
        "named_data": len(program.named_data or []),
    }
    if buf[8:12] == b"eh00":
        length = int.from_bytes(buf[12:16], "little")
        eh = {
            "magic": "eh00",
            "length": length,
            "program_size": int.from_bytes(buf[16:24], "little"),
            "segment_base_offset": int.from_bytes(buf[24:32], "little"),
        }
        if length >= 32:
            eh["segment_data_size"] = int.from_bytes(buf[32:40], "little")
        out["extended_header"] = eh
    return out


def _bp_suites(bpte: bytes):
    from executorch.devtools.bundled_program.serialize import (  # noqa: PLC0415
        deserialize_from_flatbuffer_to_bundled_program,
    )
    return deserialize_from_flatbuffer_to_bundled_program(bpte).method_test_suites


def _to_np(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.uint16).numpy().copy() if hasattr(torch, "uint16") \
                else t.view(torch.int16).numpy().view(np.uint16).copy()
        return t.numpy().copy()
    if isinstance(t, bool):
        return np.array(t, dtype=np.bool_)
    if isinstance(t, int):
        return np.array(t, dtype=np.int64)
    if isinstance(t, float):
        return np.array(t, dtype=np.float64)
    raise TypeError(type(t))


def _val_desc(v) -> Dict[str, Any]:
    if isinstance(v, torch.Tensor):
        d = {"type": "tensor", "dtype": _dtype_name(v.dtype), "shape": list(v.shape)}
        if v.dim() == 4 and v.is_contiguous(memory_format=torch.channels_last) and not v.is_contiguous():
            d["memory_format"] = "channels_last"
        return d
    return {"type": type(v).__name__, "value": v}


def _flatten_out(o) -> list:
    if isinstance(o, (tuple, list)):
        r = []
        for x in o:
            r.extend(_flatten_out(x))
        return r
    return [o]


def _sha256(buf: bytes) -> str:
    return hashlib.sha256(buf).hexdigest()


# --------------------------------------------------------------------------- #
# Export
# --------------------------------------------------------------------------- #
def export_fixture(fx: Fixture, out_dir: str) -> Dict[str, Any]:
    torch.manual_seed(SEED + sum(map(ord, fx.name)))
    specs = fx.methods()

    # Eager reference outputs (computed on deep copies so export sees pristine modules).
    eager: Dict[str, List[list]] = {}
    eager_inputs_after: Dict[str, List[list]] = {}  # the case inputs after the call (in-place mutation)
    for mname, spec in specs.items():
        ref_mod = copy.deepcopy(spec.module)
        outs = []
        ins_after = []
        for case in spec.cases:
            mod = ref_mod if spec.stateful else copy.deepcopy(spec.module)
            ins = [c.clone() if isinstance(c, torch.Tensor) else c for c in case]
            with torch.no_grad():
                o = mod(*ins)
            outs.append([x.clone() if isinstance(x, torch.Tensor) else x for x in _flatten_out(o)])
            ins_after.append(ins)
        eager[mname] = outs
        eager_inputs_after[mname] = ins_after

    eps = {}
    for mname, spec in specs.items():
        eps[mname] = export(copy.deepcopy(spec.module), spec.cases[0], dynamic_shapes=spec.dynamic_shapes,
                            strict=False)
    edge = to_edge_transform_and_lower(eps if len(eps) > 1 else eps[next(iter(eps))],
                                       compile_config=fx.compile_config())
    input_mutations = _apply_input_mutations(edge, specs, eager, eager_inputs_after)
    epm = edge.to_executorch(fx.backend_config())
    pte = epm.buffer
    program = epm.executorch_program

    suites = []
    for mname, spec in specs.items():
        cases = [MethodTestCase(inputs=list(case), expected_outputs=eager[mname][i])
                 for i, case in enumerate(spec.cases)]
        suites.append(MethodTestSuite(method_name=mname, test_cases=cases))
    bp = BundledProgram(epm, suites)
    bpte = serialize_from_bundled_program_to_flatbuffer(bp)

    # npz: test case 0 of the main method
    main = fx.main_method
    arrays = {}
    bf16_keys = []
    for i, v in enumerate(specs[main].cases[0]):
        arrays[f"in{i}"] = _to_np(v)
        if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16:
            bf16_keys.append(f"in{i}")
    for i, v in enumerate(eager[main][0]):
        arrays[f"out{i}"] = _to_np(v)
        if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16:
            bf16_keys.append(f"out{i}")

    with open(os.path.join(out_dir, f"{fx.name}.pte"), "wb") as f:
        f.write(pte)
    with open(os.path.join(out_dir, f"{fx.name}.bpte"), "wb") as f:
        f.write(bpte)
    # np.savez embeds no timestamps when given a path -> deterministic bytes
    np.savez(os.path.join(out_dir, f"{fx.name}.npz"), **arrays)
    with open(os.path.join(out_dir, f"{fx.name}.npz"), "rb") as f:
        npz_bytes = f.read()

    plans = {p.name: p for p in program.execution_plan}
    methods = {}
    all_ops = set()
    for mname, spec in specs.items():
        pinfo = _plan_info(plans[mname])
        all_ops.update(pinfo["operators"])
        methods[mname] = {
            "eager_inputs": [[_val_desc(v) for v in case] for case in spec.cases],
            "eager_outputs": [[_val_desc(v) for v in outs] for outs in eager[mname]],
            "num_test_cases": len(spec.cases),
            **pinfo,
        }

    entry = {
        "name": fx.name,
        "description": fx.description,
        "files": {"pte": f"{fx.name}.pte", "bpte": f"{fx.name}.bpte", "npz": f"{fx.name}.npz"},
        "sha256": {"pte": _sha256(pte), "bpte": _sha256(bpte), "npz": _sha256(npz_bytes)},
        "main_method": main,
        "method_names": [p.name for p in program.execution_plan],
        "methods": methods,
        "operators": sorted(all_ops),
        "export": {
            "flow": "torch.export.export(strict=False) -> executorch.exir.to_edge_transform_and_lower"
                    "(partitioner=None) -> .to_executorch(ExecutorchBackendConfig(...))",
            "backend_config": {
                "memory_planning_pass": {"alloc_graph_input": True, "alloc_graph_output": True},
                "emit_mutable_buffer_names": False,
                "segment_alignment": 128,
                "constant_tensor_alignment": None,
                "extract_delegate_segments": True,
                "remove_view_copy": True,
                **fx.export_options,
            },
            "dynamic_shapes": {m: (str(s.dynamic_shapes) if s.dynamic_shapes is not None else None)
                               for m, s in specs.items()},
        },
        "tolerance": fx.tolerance,
        "npz": {
            "test_case": 0,
            "method": main,
            "keys": list(arrays.keys()),
            "bf16_as_uint16": bf16_keys,
            "layout": "logical (row-major over the tensor's sizes), independent of dim_order",
        },
        "file_layout": _file_layout(pte),
        "bpte_layout": {
            "size": len(bpte),
            "file_identifier": bpte[4:8].decode("latin1"),
            "embedded_program_offset": bpte.find(pte),
            "test_tensor_dim_orders": sorted({
                str(list(v.val.dim_order)) for suite in _bp_suites(bpte) for c in suite.test_cases
                for v in list(c.inputs) + list(c.expected_outputs) if hasattr(v.val, "dim_order")}),
        },
        "notes": list(fx.notes),
    }
    if bf16_keys:
        entry["notes"].append("bfloat16 tensors in the npz are stored as uint16 bit patterns "
                              "(keys listed under npz.bf16_as_uint16).")
    if input_mutations:
        entry["input_mutations"] = {
            m: [dict(im, **_input_mutation_writeback(plans[m], methods[m], im["input_index"])) for im in ims]
            for m, ims in input_mutations.items()}
    constant_outputs = {m: [{"output_index": k, "value_index": o["value_index"],
                             "data_buffer_idx": plans[m].values[o["value_index"]].val.data_buffer_idx,
                             "memory_planned": o["memory_planned"]}
                            for k, o in enumerate(methods[m]["outputs"]) if o.get("constant")] for m in methods}
    constant_outputs = {m: v for m, v in constant_outputs.items() if v}
    if constant_outputs:
        entry["constant_outputs"] = constant_outputs
    entry.update(fx.extra)
    return entry


def _apply_input_mutations(edge, specs, eager, eager_inputs_after) -> Dict[str, list]:
    """A user input mutated in place becomes a program output (kind USER_INPUT_MUTATION, placed before the
    user outputs). Rebuild the expected outputs in the program's output order: the mutated input's value
    after the eager call, then the returned values. Methods without input mutation are left untouched."""
    from torch.export.graph_signature import InputKind, OutputKind  # noqa: PLC0415

    found: Dict[str, list] = {}
    for mname in specs:
        sig = edge.exported_program(mname).graph_signature
        user_inputs = [s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
        if not any(s.kind == OutputKind.USER_INPUT_MUTATION for s in sig.output_specs):
            continue
        ims = []
        new_outs = []
        for case_i, outs in enumerate(eager[mname]):
            it = iter(outs)
            row = []
            for k, s in enumerate(sig.output_specs):
                if s.kind == OutputKind.USER_INPUT_MUTATION:
                    idx = user_inputs.index(s.target)
                    row.append(eager_inputs_after[mname][case_i][idx].clone())
                    if case_i == 0:
                        ims.append({"output_index": k, "input_index": idx, "input_name": s.target})
                elif s.kind == OutputKind.USER_OUTPUT:
                    row.append(next(it))
            row.extend(it)
            new_outs.append(row)
        eager[mname] = new_outs
        found[mname] = ims
    return found


def _input_mutation_writeback(plan: et_schema.ExecutionPlan, minfo: Dict[str, Any], input_index: int):
    """How the program writes back into a mutated input value: the kernel calls whose first argument
    (self / destination for copy_) is the input's value index."""
    vidx = plan.inputs[input_index]
    calls = []
    for c in plan.chains:
        for ins in c.instructions:
            a = ins.instr_args
            if isinstance(a, et_schema.KernelCall) and a.args and a.args[0] == vidx:
                op = plan.operators[a.op_index]
                name = f"{op.name}.{op.overload}" if op.overload else op.name
                if name.endswith("_") or (a.args[-1] == vidx and len(a.args) > 1):
                    calls.append({"op": name, "args": list(a.args)})
    return {
        "value_index": vidx,
        "input_memory_planned": minfo["inputs"][input_index]["memory_planned"],
        "output_is_input_value": vidx in plan.outputs,
        "writes_back_into_input": bool(calls),
        "writeback_calls": calls,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", help="export only these fixtures (manifest is merged)")
    ap.add_argument("--date", default=None, help="date string to record (default: today, UTC)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.use_deterministic_algorithms(True, warn_only=True)

    manifest_path = os.path.join(args.out, "manifest.json")
    old = {}
    if args.only and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            old = json.load(f)

    fixtures_out: Dict[str, Any] = {e["name"]: e for e in old.get("fixtures", [])}
    skipped: Dict[str, Any] = {s["name"]: s for s in old.get("skipped", [])}
    for fx in FIXTURES:
        if args.only and fx.name not in args.only:
            continue
        print(f"[export] {fx.name} ...", flush=True)
        try:
            fixtures_out[fx.name] = export_fixture(fx, args.out)
            skipped.pop(fx.name, None)
            print(f"[export] {fx.name}: ok ({fixtures_out[fx.name]['operators']})", flush=True)
        except Exception as e:  # record and continue
            tb = traceback.format_exc()
            msg = f"{type(e).__name__}: {e}".strip()
            skipped[fx.name] = {"name": fx.name, "description": fx.description,
                                "error": msg.splitlines()[0][:500], "traceback_tail": tb.splitlines()[-8:]}
            fixtures_out.pop(fx.name, None)
            for ext in ("pte", "bpte", "npz"):
                p = os.path.join(args.out, f"{fx.name}.{ext}")
                if os.path.exists(p):
                    os.remove(p)
            print(f"[export] {fx.name}: SKIPPED: {msg.splitlines()[0][:300]}", flush=True)

    order = [fx.name for fx in FIXTURES]
    fixtures_list = sorted(fixtures_out.values(), key=lambda e: order.index(e["name"]) if e["name"] in order else 999)
    all_ops = sorted({op for e in fixtures_list for op in e["operators"]})
    manifest = {
        "format": "executorch-fixtures-manifest/1",
        "generated_by": "tools/export/export_fixtures.py",
        "date": args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "seed": SEED,
        "versions": {
            "torch": torch.__version__,
            "executorch": pkg_version("executorch"),
            "numpy": np.__version__,
            "flatbuffers": pkg_version("flatbuffers"),
            "python": platform.python_version(),
        },
        "all_operators": all_ops,
        "observations": OBSERVATIONS,
        "fixtures": fixtures_list,
        "skipped": sorted(skipped.values(), key=lambda s: order.index(s["name"]) if s["name"] in order else 999),
    }
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"wrote {len(fixtures_list)} fixtures, {len(skipped)} skipped -> {args.out}")
    print("operators:\n  " + "\n  ".join(all_ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
