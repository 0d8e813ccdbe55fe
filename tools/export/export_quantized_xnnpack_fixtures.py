"""PT2E-quantized programs (XNNPACKQuantizer, symmetric per-channel weights), lowered to XNNPACK and not lowered,
with upstream's runtime as the expectation (quantized numerics are defined by the runtime, not by torch eager).

    .venv-export/bin/python tools/export/export_quantized_xnnpack_fixtures.py [--only NAME ...]
    # writes tests/fixtures/xnnpack_quantized/

Per fixture NAME: NAME.pte and NAME.npz with in0.. (the inputs), out0.. (upstream's outputs on the same file) and
eager0.. (torch eager on the quantized-dequantized model, for information). manifest.json records the flow, the
XNNPACK node kinds and value datatypes of each payload, and the tolerance.
"""
import argparse
import json
import logging
import pathlib
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: E402
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (  # noqa: E402
    XNNPACKQuantizer, get_symmetric_quantization_config)
from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "xnnpack_quantized"
SEED = 20261201


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(16, 32), nn.Linear(32, 24), nn.Linear(24, 5)

    def forward(self, x):
        return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))


class SiluMLP(nn.Module):
    """A feed-forward block with SiLU. With dynamically quantized activations the linear layers output floats and run
    on the integer kernels, which do not compute the SiLU as they write (Note [xnnpack silu]): it runs as a chain of
    its own (Note [xnnpack activation chain])."""

    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 48), nn.Linear(48, 16)

    def forward(self, x):
        return self.l2(F.silu(self.l1(x)))


class GeluMLP(nn.Module):
    """GELU and tanh between statically quantized linear layers: the quantizer leaves both in float between a
    dequantizing and a quantizing Convert, as in a ViT's feed-forward block; each runs as one elementwise chain
    (Note [xnnpack activation chain]), a table of 256 bytes where its ends are held as bytes."""

    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(16, 64), nn.Linear(64, 32), nn.Linear(32, 8)

    def forward(self, x):
        return self.l3(torch.tanh(self.l2(F.gelu(self.l1(x)))))


class CNN(nn.Module):
    """conv+bn+relu, depthwise conv, residual add, max/avg pooling, a linear head: the static qs8 node kinds."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.c2 = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = F.relu(self.bn(self.c1(x)))
        z = self.c2(F.relu(self.dw(y)))
        y = F.max_pool2d(y + z, 2)
        y = F.avg_pool2d(y, 2)
        return self.fc(torch.flatten(y, 1))


class InvertedResidual(nn.Module):
    """mobilenet_v2's block: ReLU6 after the expanding and the depthwise convolutions stays a Clamp node of its own
    in the payload, reading a quantized convolution output that nothing else reads (the executor runs it inside the
    convolution, Note [xnnpack block finish]); a ReLU6 on an output that the residual add also reads does not fuse."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Conv2d(8, 24, 1)
        self.dw = nn.Conv2d(24, 24, 3, padding=1, groups=24)
        self.project = nn.Conv2d(24, 8, 1)
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 6)

    def forward(self, x):
        x = self.stem(x)
        y = F.relu6(self.dw(F.relu6(self.expand(x))))
        y = self.project(y) + x
        y = F.relu6(y) + y
        return self.fc(y.mean((2, 3)))


class MBConv(nn.Module):
    """efficientnet_b0's block: SiLU after the stem, expanding and depthwise convolutions, which the quantized graph
    holds as a Convert to float, a Sigmoid and a Multiply, and a Convert back onto a grid (the executor runs each as
    one pass, Note [xnnpack activation chain]); the squeeze-excitation's SiLU and sigmoid gate; a residual add."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.expand = nn.Conv2d(8, 32, 1)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.se_reduce = nn.Conv2d(32, 8, 1)
        self.se_expand = nn.Conv2d(8, 32, 1)
        self.project = nn.Conv2d(32, 8, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.silu(self.stem(x))
        y = F.silu(self.expand(x))
        y = F.silu(self.dw(y))
        s = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(y.mean((2, 3), keepdim=True)))))
        y = self.project(y * s) + x
        return self.fc(y.mean((2, 3)))


class MobileNetStage(nn.Module):
    """mobilenet_v2's inverted residuals, whose activations the executor holds as bytes from node to node (Note [byte
    activations]): a 3x3 stride-2 stem, expanding 1x1 convolutions, 3x3 and 5x5 depthwise convolutions at strides 1
    and 2 over 40, 48 and 72 channels (whole 16-channel blocks and tails), projections, residual adds (one reading
    another add's output), and the feature map itself as the output: 1,344 values, where a pooled output would hide
    a wrong byte."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        # (in, expanded, out, kernel, stride): a residual where stride 1 and in == out
        self.shapes = [(16, 40, 16, 3, 1), (16, 40, 16, 3, 1), (16, 48, 24, 5, 2), (24, 72, 24, 3, 1)]
        self.blocks = nn.ModuleList()
        for cin, mid, cout, k, stride in self.shapes:
            self.blocks.append(nn.ModuleList([nn.Conv2d(cin, mid, 1),
                                              nn.Conv2d(mid, mid, k, stride=stride, padding=k // 2, groups=mid),
                                              nn.Conv2d(mid, cout, 1)]))

    def forward(self, x):
        x = F.relu6(self.stem(x))
        for (cin, _, cout, _, stride), (expand, dw, project) in zip(self.shapes, self.blocks):
            y = project(F.relu6(dw(F.relu6(expand(x)))))
            x = y + x if stride == 1 and cin == cout else y
        return x


class EfficientNetStage(nn.Module):
    """efficientnet_b0's MBConv blocks with a feature-map output: SiLU chains (Convert, Sigmoid, Multiply, Convert)
    between int8 convolutions, which read and write their activations as bytes (Note [byte activations]), a
    squeeze-and-excitation gate in one block, a 5x5 stride-2 depthwise convolution in the other, a residual add."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.expand1, self.dw1 = nn.Conv2d(16, 48, 1), nn.Conv2d(48, 48, 3, padding=1, groups=48)
        self.se_reduce, self.se_expand = nn.Conv2d(48, 8, 1), nn.Conv2d(8, 48, 1)
        self.project1 = nn.Conv2d(48, 16, 1)
        self.expand2, self.dw2 = nn.Conv2d(16, 64, 1), nn.Conv2d(64, 64, 5, stride=2, padding=2, groups=64)
        self.project2 = nn.Conv2d(64, 24, 1)

    def forward(self, x):
        x = F.silu(self.stem(x))
        y = F.silu(self.dw1(F.silu(self.expand1(x))))
        s = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(y.mean((2, 3), keepdim=True)))))
        x = self.project1(y * s) + x
        return self.project2(F.silu(self.dw2(F.silu(self.expand2(x)))))


class ResNetStem(nn.Module):
    """resnet18's stem: a 7x7 stride-2 convolution over 3 channels (21-byte kernel rows), ReLU, a 3x3 stride-2 max
    pool with padding (windows at the edges partly outside), then a basic block's 3x3 convolutions and residual add
    over 40 channels, the feature map itself the output. The pool sits between int8 convolutions, so it pools
    bytes (Note [byte activations])."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 40, 7, stride=2, padding=3)
        self.c1, self.c2 = nn.Conv2d(40, 40, 3, padding=1), nn.Conv2d(40, 40, 3, padding=1)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.stem(x)), 3, stride=2, padding=1)
        return F.relu(self.c2(F.relu(self.c1(x))) + x)


def calibrate(model, example):
    torch.manual_seed(SEED + 1)
    for _ in range(8):
        model(*(torch.randn_like(x) for x in example))


def quantize(model, example, dynamic, dynamic_shapes=None):
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True,
                                                                                 is_dynamic=dynamic))
    graph = torch.export.export(model, example, dynamic_shapes=dynamic_shapes).module()
    prepared = prepare_pt2e(graph, quantizer)
    calibrate(prepared, example)
    return convert_pt2e(prepared)


def run_dump(pte, *flags):
    import subprocess
    import sys
    return subprocess.run([sys.executable, str(pathlib.Path(__file__).parent / "dump_xnnpack_payload.py"), "-",
                           *flags], input=pte, capture_output=True, check=True).stdout.decode()


def xnnpack_summary(pte):
    return [line for line in run_dump(pte, "--summary").splitlines() if "delegate" in line]


def per_tensor_scales(ep):
    """The per-tensor activation scales of the quantized graph (the payloads store them as float32; tests find and
    corrupt them to check the refusals)."""
    scales = set()
    for node in ep.graph.nodes:
        if node.op == "call_function" and "quantize_per_tensor" in str(node.target):
            if isinstance(node.args[1], float):
                scales.add(node.args[1])
    return sorted(scales)


def upstream_outputs(pte_path, inputs):
    import executorch.kernels.quantized  # noqa: F401  (quantized_decomposed kernels for the unlowered programs)
    from executorch.extension.pybindings.portable_lib import _load_for_executorch
    module = _load_for_executorch(str(pte_path))
    return [o.numpy().copy() for o in module.forward(tuple(inputs))]


def fixtures():
    torch.manual_seed(SEED)
    mlp, cnn, block = MLP().eval(), CNN().eval(), InvertedResidual().eval()
    mbconv, silu_mlp, gelu_mlp = MBConv().eval(), SiluMLP().eval(), GeluMLP().eval()
    stage, effstage, stem = MobileNetStage().eval(), EfficientNetStage().eval(), ResNetStem().eval()
    with torch.no_grad():
        cnn.bn.running_mean.uniform_(-0.5, 0.5)
        cnn.bn.running_var.uniform_(0.5, 1.5)
    x_mlp, x_cnn = (torch.randn(4, 16),), (torch.randn(2, 3, 16, 16),)
    batch = {0: torch.export.Dim("batch", min=1, max=16)}
    return {
        # name: (model, inputs, dynamic activations, lowered[, dynamic shapes, extra batch sizes])
        "q_mlp_dynamic_shape_xnnpack": (mlp, x_mlp, True, True, (batch,), (1, 7, 16)),
        "q_mlp_static_shape_xnnpack": (mlp, x_mlp, False, True, (batch,), (1, 9)),
        "q_mlp_static_xnnpack": (mlp, x_mlp, False, True),
        "q_mlp_dynamic_xnnpack": (mlp, x_mlp, True, True),
        "q_cnn_static_xnnpack": (cnn, x_cnn, False, True),
        "q_inverted_residual_xnnpack": (block, (torch.randn(1, 3, 12, 12),), False, True),
        "q_mbconv_xnnpack": (mbconv, (2 * torch.randn(1, 3, 12, 10),), False, True),
        "q_mobilenet_stage_xnnpack": (stage, (torch.randn(1, 3, 32, 28),), False, True),
        "q_efficientnet_stage_xnnpack": (effstage, (torch.randn(1, 3, 32, 28),), False, True),
        "q_resnet_stem_xnnpack": (stem, (torch.randn(1, 3, 38, 34),), False, True),
        "q_silu_mlp_dynamic_xnnpack": (silu_mlp, (torch.randn(3, 16),), True, True),
        "q_gelu_mlp_xnnpack": (gelu_mlp, (2 * torch.randn(6, 16),), False, True),
        "q_mlp_static_portable": (mlp, x_mlp, False, False),
        "q_cnn_static_portable": (cnn, x_cnn, False, False),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"fixtures": {}}
    for name, (model, example, dynamic, lowered, *shapes) in fixtures().items():
        if args.only and name not in args.only:
            continue
        dynamic_shapes, sizes = shapes if shapes else (None, ())
        qmodel = quantize(model, example, dynamic, dynamic_shapes)
        ep = torch.export.export(qmodel, example, dynamic_shapes=dynamic_shapes)
        partitioner = [XnnpackPartitioner()] if lowered else []
        pte = to_edge_transform_and_lower(ep, partitioner=partitioner).to_executorch().buffer
        (OUT / f"{name}.pte").write_bytes(pte)
        torch.manual_seed(SEED + 2)
        inputs = [torch.randn_like(x) for x in example]
        want = upstream_outputs(OUT / f"{name}.pte", inputs)
        with torch.no_grad():
            eager = qmodel(*inputs)
        eager = eager if isinstance(eager, tuple) else (eager,)
        arrays = {f"in{i}": x.numpy() for i, x in enumerate(inputs)}
        arrays.update({f"out{i}": y for i, y in enumerate(want)})
        arrays.update({f"eager{i}": y.numpy() for i, y in enumerate(eager)})
        for k, n in enumerate(sizes):  # more calls at other sizes of the dynamic batch, in this order
            more = [torch.randn(n, *x.shape[1:]) for x in example]
            arrays.update({f"case{k}_in{i}": x.numpy() for i, x in enumerate(more)})
            arrays.update({f"case{k}_out{i}": y for i, y in enumerate(upstream_outputs(OUT / f"{name}.pte", more))})
        np.savez(OUT / f"{name}.npz", **arrays)
        diff = max(float(np.abs(w - e.numpy()).max()) for w, e in zip(want, eager))
        summary = xnnpack_summary(pte) if lowered else []
        scales = per_tensor_scales(ep) if lowered else []
        manifest["fixtures"][name] = {"dynamic": dynamic, "lowered": lowered, "bytes": len(pte), "sizes": list(sizes),
                                      "max_abs_upstream_vs_eager": diff, "xnnpack": summary,
                                      "per_tensor_scales": scales,
                                      "tolerance": {"atol": 1e-4, "rtol": 1e-4}}
        print(name, len(pte), "bytes; upstream vs eager", diff, summary, flush=True)
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
