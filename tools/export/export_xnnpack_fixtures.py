#!/usr/bin/env python3
"""Export the XNNPACK-delegate fixtures with the REAL upstream exporter and upstream's XnnpackPartitioner.

Run with the export venv (see tools/export/make_export_venv.sh):

    .venv-export/bin/python tools/export/export_xnnpack_fixtures.py [--out tests/fixtures/xnnpack] [--only NAME ...]

Per fixture NAME: torch.export.export -> to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()]) ->
to_executorch(). Writes NAME.pte, NAME.npz (in0.., float32 inputs; out0.., torch eager outputs) and an entry of
manifest.json: tolerances, the delegate ids the program calls, and the XNNPACK node kinds each payload holds (read
back from the serialized program with executorch's deserializer and flatc, so the list is what the runtime sees).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import struct
import tempfile
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.exir._serialize._flatbuffer import _run_flatc  # noqa: E402
from executorch.exir._serialize._program import deserialize_pte_binary  # noqa: E402
import executorch.backends.xnnpack.serialization.xnnpack_graph_serialize as xnn_ser  # noqa: E402

SEED = 20261130
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(REPO_ROOT, "tests", "fixtures", "xnnpack")
SCHEMA = os.path.join(os.path.dirname(xnn_ser.__file__), "schema.fbs")
MAX_BYTES = 300 * 1024


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 5)

    def forward(self, x):
        return self.l3(torch.tanh(self.l2(F.relu(self.l1(x))))).sigmoid()


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 12, 3, stride=2, padding=1)
        self.fc = nn.Linear(12, 4)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        y = F.hardswish(self.conv2(y))
        y = F.avg_pool2d(y, 2)
        y = F.adaptive_avg_pool2d(y, 1).flatten(1)
        return self.fc(y)


class DepthwiseSeparable(nn.Module):
    """A MobileNet-like inverted residual block: expand, depthwise 3x3, project, residual add."""

    def __init__(self, c=8, e=16):
        super().__init__()
        self.expand = nn.Conv2d(c, e, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(e)
        self.dw = nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False)
        self.bn2 = nn.BatchNorm2d(e)
        self.dw2 = nn.Conv2d(e, 2 * e, 3, stride=2, padding=1, groups=e)  # channel multiplier 2
        self.project = nn.Conv2d(2 * e, c, 1)

    def forward(self, x):
        y = F.relu6(self.bn1(self.expand(x)))
        y = F.hardswish(self.bn2(self.dw(y)))
        y = self.project(self.dw2(y))
        return y + F.max_pool2d(x, 2)


class TransformerBlock(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.h, self.d = heads, d
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.reshape(b, t, self.h, d // self.h).transpose(1, 2).reshape(b * self.h, t, d // self.h)
        k = k.reshape(b, t, self.h, d // self.h).transpose(1, 2).reshape(b * self.h, t, d // self.h)
        v = v.reshape(b, t, self.h, d // self.h).transpose(1, 2).reshape(b * self.h, t, d // self.h)
        att = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * (1.0 / (d // self.h) ** 0.5), dim=-1)
        y = torch.bmm(att, v).reshape(b, self.h, t, d // self.h).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


class Mixed(nn.Module):
    """Delegated linears around ops the partitioner leaves to the portable kernels (cumsum, argmax)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x):
        y = torch.cumsum(F.relu(self.a(x)), dim=1)
        z = self.b(y)
        return z, torch.argmax(z, dim=1)


class Elementwise(nn.Module):
    """Unary/binary node kinds, broadcasting, cat, slice, pad, permute, reshape."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, 6))
        self.prelu = nn.PReLU(6)

    def forward(self, x, y):
        a = torch.abs(x) + 0.5
        u = torch.sqrt(a) - torch.rsqrt(a) * torch.log(a)
        v = torch.exp(-torch.square(x)) * torch.sin(x) / (torch.cos(y) + 2.0)
        w = torch.maximum(torch.floor(x * 3), torch.ceil(y * 2)) - torch.minimum(x, self.w)
        z = F.leaky_relu(u - v, 0.1) + F.elu(w, 0.7) + torch.clamp(-x, -0.5, 0.7)
        c = torch.cat([z, u, v], dim=1)
        s = c[:, 2:11]
        p = F.pad(s, (1, 2))
        return p.permute(1, 0).reshape(4, -1), self.prelu(z.reshape(2, 6, 1, 1)).reshape(2, 6)


class Spatial(nn.Module):
    """ConvTranspose2d, bilinear resize, asymmetric-free pooling with stride, concatenation on channels."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1)
        self.up = nn.ConvTranspose2d(6, 4, 2, stride=2)

    def forward(self, x):
        y = torch.sigmoid(self.conv(x))
        r = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        t = self.up(y)
        return torch.cat([r[:, :4], t], dim=1)


class CeilPool(nn.Module):
    """ceil_mode max pooling, which the exporter lowers to asymmetric (bottom/right) padding."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return F.max_pool2d(self.conv(x), 3, stride=2, ceil_mode=True)


class AvgPool(nn.Module):
    """Average pooling as the partitioner lowers it: padded windows that do not count the padding
    (count_include_pad=False; the default, which counts it, stays outside the delegate), at strides 1 and 2, and an
    unpadded 2x2, over 19 channels (not a whole register of them)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 19, 3)

    def forward(self, x):
        y = self.conv(x)
        a = F.avg_pool2d(y, 3, stride=1, padding=1, count_include_pad=False)
        b = F.avg_pool2d(y, 3, stride=2, padding=1, count_include_pad=False)
        return a, b, F.avg_pool2d(y, 2)


class Silu(nn.Module):
    """efficientnet's activation, SiLU, which the exporter lowers to Sigmoid and Multiply: after a convolution, a
    depthwise convolution and a linear layer (the runtime computes these as the layer writes its output), once
    where a residual add reads the activation's input too (run as two nodes), and once on an add's output (one pass
    of its own)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.dw = nn.Conv2d(16, 16, 5, padding=2, groups=16)
        self.pw = nn.Conv2d(16, 16, 1)
        self.fc = nn.Linear(16, 24)

    def forward(self, x):
        y = F.silu(self.conv(x))
        y = F.silu(self.dw(y))
        z = self.pw(y)
        y = z + F.silu(z)
        y = F.silu(y + z)
        y = F.adaptive_avg_pool2d(y, 1).flatten(1)
        return F.silu(self.fc(y))


class Winograd(nn.Module):
    """3x3 stride-1 convolutions large enough for the runtime's Winograd transforms: F(4x4, 3x3) on the 24x24
    layer (16 -> 64 channels, a folded BatchNorm, ReLU), F(2x2, 3x3) on the 12x12 one (64 -> 64, ReLU6 fused as
    the output clamp, then a residual add); the last convolution, strided, stays on the direct GEMM."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(16, 64, 3, padding=1)
        self.bn = nn.BatchNorm2d(64)
        self.conv2 = nn.Conv2d(64, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 16, 3, stride=2, padding=1)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        y = F.relu6(self.conv2(y)) + y
        return self.conv3(y)


class SqueezeExcite(nn.Module):
    """efficientnet_b0's MBConv block at batch 1: a pointwise expansion and a depthwise convolution with SiLU, a
    squeeze-and-excitation gate per channel (pool, two 1x1 convolutions, sigmoid, multiply) and a pointwise
    projection to 24 channels with a residual add. The runtime folds the gate into the projection's filter where
    the activation is the larger (Note [xnnpack gated filter]); the second block's 3x3 map projected to 96 channels
    keeps its Multiply."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Conv2d(24, 64, 1)
        self.dw = nn.Conv2d(64, 64, 3, padding=1, groups=64)
        self.squeeze, self.excite = nn.Conv2d(64, 8, 1), nn.Conv2d(8, 64, 1)
        self.project = nn.Conv2d(64, 24, 1)
        self.dw2 = nn.Conv2d(24, 24, 3, stride=4, padding=1, groups=24)
        self.squeeze2, self.excite2 = nn.Conv2d(24, 4, 1), nn.Conv2d(4, 24, 1)
        self.project2 = nn.Conv2d(24, 96, 1)

    @staticmethod
    def gate(x, squeeze, excite):
        return x * torch.sigmoid(excite(F.silu(squeeze(F.adaptive_avg_pool2d(x, 1)))))

    def forward(self, x):
        y = F.silu(self.dw(F.silu(self.expand(x))))
        y = x + self.project(self.gate(y, self.squeeze, self.excite))
        z = F.silu(self.dw2(y))
        return self.project2(self.gate(z, self.squeeze2, self.excite2))


class Bands(nn.Module):
    """Two inverted-residual halves whose wide tensor (128 x 128 x 40 floats, 2.6 MB) passes the runtime's threshold
    for running the pointwise expansion band by band into the depthwise layer (Note [pointwise then depthwise]):
    ReLU6 then a 3x3 stride-1 depthwise layer; SiLU then a 5x5 stride-2 one. 40 channels: two and a half AVX-512
    registers."""

    def __init__(self):
        super().__init__()
        self.expand1, self.dw1, self.project1 = nn.Conv2d(4, 40, 1), nn.Conv2d(40, 40, 3, padding=1, groups=40), nn.Conv2d(40, 4, 1)
        self.expand2, self.dw2 = nn.Conv2d(4, 40, 1), nn.Conv2d(40, 40, 5, stride=2, padding=2, groups=40)
        self.project2 = nn.Conv2d(40, 4, 1)

    def forward(self, x):
        y = x + self.project1(F.relu6(self.dw1(F.relu6(self.expand1(x)))))
        return self.project2(self.dw2(F.silu(self.expand2(y))))


class ReshapedInputs(nn.Module):
    """Graph inputs reshaped by the delegate's first nodes, which read the caller's bytes in place (Note [xnnpack
    borrowed input]): x's reshape feeds a linear layer, y's a SiLU with no layer before it to run it (its Sigmoid
    and Multiply write their own outputs). The caller's tensors must come back unchanged."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 8)

    def forward(self, x, y):
        a = self.fc(x.reshape(5, 24))
        b = y.reshape(2, 35)
        return a, b * torch.sigmoid(b)


def fixtures():
    torch.manual_seed(SEED)
    return {
        "xnn_mlp": (MLP(), (torch.randn(4, 16),), {"rtol": 1e-5, "atol": 1e-6}),
        "xnn_cnn": (SmallCNN(), (torch.randn(2, 3, 16, 16),), {"rtol": 1e-4, "atol": 1e-5}),
        "xnn_dwsep": (DepthwiseSeparable(), (torch.randn(1, 8, 12, 12),), {"rtol": 1e-4, "atol": 1e-5}),
        "xnn_transformer": (TransformerBlock(), (torch.randn(2, 5, 16),), {"rtol": 1e-4, "atol": 1e-5}),
        "xnn_mixed": (Mixed(), (torch.randn(3, 8),), {"rtol": 1e-5, "atol": 1e-6}),
        "xnn_elementwise": (Elementwise(), (torch.randn(2, 6), torch.randn(2, 6)), {"rtol": 1e-5, "atol": 1e-5}),
        "xnn_spatial": (Spatial(), (torch.randn(1, 4, 6, 6),), {"rtol": 1e-4, "atol": 1e-5}),
        "xnn_ceilpool": (CeilPool(), (torch.randn(1, 3, 12, 12),), {"rtol": 1e-5, "atol": 1e-6}),
        "xnn_silu": (Silu(), (3 * torch.randn(2, 3, 10, 11),), {"rtol": 1e-4, "atol": 1e-5}),
        "xnn_winograd": (Winograd(), (torch.randn(1, 16, 24, 24),), {"rtol": 1e-4, "atol": 1e-5}),
        "xnn_se": (SqueezeExcite(), (torch.randn(1, 24, 12, 12),), {"rtol": 1e-4, "atol": 1e-5}),
        "xnn_avgpool": (AvgPool(), (torch.randn(2, 3, 11, 13),), {"rtol": 1e-5, "atol": 1e-6}),
        "xnn_bands": (Bands(), (torch.randn(1, 4, 128, 128),), {"rtol": 1e-4, "atol": 1e-5}),
        "xnn_reshaped_inputs": (ReshapedInputs(), (torch.randn(10, 12), 3 * torch.randn(7, 10)),
                                {"rtol": 1e-5, "atol": 1e-6}),
    }


def randomize_bn(m):
    # Fresh BatchNorm statistics are the identity: give them values so folding is exercised.
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.2, 0.2)


def node_kinds(pte: bytes):
    """The XNNPACK node kinds of every XnnpackBackend payload in the program, decoded with flatc."""
    pf = deserialize_pte_binary(pte)
    prog = pf.program
    kinds, ids = [], []
    for plan in prog.execution_plan:
        for d in plan.delegates:
            ids.append(d.id)
            if d.id != "XnnpackBackend":
                continue
            assert d.processed.location == 0, "XNNPACK payloads are inline in these fixtures"
            blob = prog.backend_delegate_data[d.processed.index].data
            fb_off, fb_size = struct.unpack("<II", blob[10:18])
            td = tempfile.mkdtemp()
            try:
                with open(os.path.join(td, "g.bin"), "wb") as f:
                    f.write(blob[fb_off:fb_off + fb_size])
                shutil.copy(SCHEMA, os.path.join(td, "schema.fbs"))
                _run_flatc(["--json", "--strict-json", "--raw-binary", "-o", td,
                            os.path.join(td, "schema.fbs"), "--", os.path.join(td, "g.bin")])
                with open(os.path.join(td, "g.json")) as f:
                    text = f.read()  # not strict JSON: output_min_max may print inf
            finally:
                shutil.rmtree(td)
            kinds.append(sorted(set(re.findall(r'"xnode_union_type": "(\w+)"', text))))
    return ids, kinds



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    manifest_path = os.path.join(a.out, "manifest.json")
    manifest = {"fixtures": []}
    if a.only and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    entries = {e["name"]: e for e in manifest["fixtures"]}
    for name, (model, args, tol) in fixtures().items():
        if a.only and name not in a.only:
            continue
        randomize_bn(model)
        model.eval()
        with torch.no_grad():
            eager = model(*args)
        eager = eager if isinstance(eager, tuple) else (eager,)
        prog = to_edge_transform_and_lower(torch.export.export(model, args),
                                           partitioner=[XnnpackPartitioner()]).to_executorch()
        pte = prog.buffer
        assert len(pte) < MAX_BYTES, f"{name}: {len(pte)} bytes is over the {MAX_BYTES}-byte budget"
        ids, kinds = node_kinds(pte)
        assert "XnnpackBackend" in ids, f"{name}: nothing was delegated"
        with open(os.path.join(a.out, name + ".pte"), "wb") as f:
            f.write(pte)
        arrays = {f"in{i}": x.numpy() for i, x in enumerate(args)}
        arrays.update({f"out{i}": y.numpy() for i, y in enumerate(eager)})
        np.savez(os.path.join(a.out, name + ".npz"), **arrays)
        entries[name] = {"name": name, "pte": name + ".pte", "npz": name + ".npz", "tolerance": tol,
                         "delegates": ids, "xnnpack_node_kinds": kinds, "bytes": len(pte)}
        print(f"{name}: {len(pte)} bytes, delegates {ids}, nodes {kinds}")
    manifest = {"generator": "tools/export/export_xnnpack_fixtures.py", "seed": SEED,
                "fixtures": [entries[k] for k in sorted(entries)]}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
