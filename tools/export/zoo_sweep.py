#!/usr/bin/env python3
"""Export real model architectures with the real exporter, then run them with this project's runtime.

A developer check, not a test: the models are too large to commit and CI has no exporter. It finds the operators a
real model needs that the portable kernel table lacks, and any output that differs from torch eager.

    .venv-export/bin/python tools/export/zoo_sweep.py export [--out /tmp/zoo] [--only NAME ...] [--xnnpack] [--quantize]
    .venv/bin/python        tools/export/zoo_sweep.py run    [--out /tmp/zoo] [--only NAME ...] [--upstream PY]

`export` writes NAME.pte and NAME.npz (inputs in0.., torch eager outputs out0.., the forward's FLOP count as torch's
FlopCounterMode counts it: 2 per multiply-add) per model; `run` loads each with
`portable_lib`, checks one call against eager, and prints one line per model: ok with the median time of a few
calls, or what went wrong. With `--upstream PYTHON` (e.g. .venv-export/bin/python) it also times upstream's
portable_lib on the same files in that interpreter and prints the ratio ours / upstream. The weights are random
(seeded): torchvision is used for its architectures only, nothing is downloaded.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import numpy as np

SEED = 1234


def _torchvision():
    """torchvision without its compiled ops: PyPI's Linux wheel ships CUDA ops that don't load next to a CPU torch,
    and its import then fails registering fake kernels for them. The classification and segmentation models used
    here never call those ops, so empty definitions are enough to get past the import."""
    import torch

    for op in ("nms", "qnms"):
        try:
            torch.library.define("torchvision::" + op, "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:
            pass  # the real ops loaded
    import torchvision

    return torchvision


def _models():
    import torch
    import torch.nn as nn

    tv = _torchvision()
    m = tv.models
    seg = tv.models.segmentation
    img = (1, 3, 224, 224)

    class SegOut(nn.Module):
        """Segmentation models return a dict; the exporter needs tensors."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)["out"]

    class UNetish(nn.Module):
        """Encoder-decoder with the ops segmentation and super-resolution models use: transposed conv, nearest and
        bilinear upsampling, reflection padding, pixel shuffle."""

        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 8, 3), nn.ReLU(), nn.MaxPool2d(2))
            self.mid = nn.Conv2d(8, 16, 3, padding=1)
            self.up1 = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.ps = nn.Sequential(nn.Conv2d(8, 12, 3, padding=1), nn.PixelShuffle(2))
            self.pad = nn.ReplicationPad2d((1, 2, 0, 1))

        def forward(self, x):
            e = self.enc(x)
            y = self.up1(torch.relu(self.mid(e)))
            y = nn.functional.interpolate(y, scale_factor=0.5, mode="nearest")
            y = self.up2(y)
            return self.pad(self.ps(y))

    return {
        "resnet18": (lambda: m.resnet18(), img),
        "mobilenet_v2": (lambda: m.mobilenet_v2(), img),
        "mobilenet_v3_small": (lambda: m.mobilenet_v3_small(), img),
        "squeezenet1_1": (lambda: m.squeezenet1_1(), img),
        "shufflenet_v2_x0_5": (lambda: m.shufflenet_v2_x0_5(), img),
        "mnasnet0_5": (lambda: m.mnasnet0_5(), img),
        "efficientnet_b0": (lambda: m.efficientnet_b0(), img),
        "regnet_y_400mf": (lambda: m.regnet_y_400mf(), img),
        "googlenet": (lambda: m.googlenet(aux_logits=False, init_weights=True), img),
        "densenet121": (lambda: m.densenet121(), img),
        "convnext_tiny": (lambda: m.convnext_tiny(), img),
        "swin_t": (lambda: m.swin_t(), img),
        "vit_b_32": (lambda: m.vit_b_32(), img),
        "maxvit_t": (lambda: m.maxvit_t(), img),
        "lraspp_mobilenet_v3_large": (lambda: SegOut(seg.lraspp_mobilenet_v3_large(weights_backbone=None)),
                                      (1, 3, 256, 256)),
        "deeplabv3_mobilenet_v3_large": (lambda: SegOut(seg.deeplabv3_mobilenet_v3_large(weights_backbone=None,
                                                                                         aux_loss=False)),
                                         (1, 3, 256, 256)),
        "unetish": (UNetish, (2, 3, 32, 32)),
    }


def _quantize_static(model, x):
    """PT2E static int8: XNNPACKQuantizer's symmetric per-channel config (qs8 activations per tensor, qc8 weights),
    calibrated on a few random inputs of the example's shape."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config)
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    gen = torch.Generator().manual_seed(SEED + 1)
    for _ in range(4):
        prepared(torch.randn(x.shape, generator=gen))
    return convert_pt2e(prepared)


def export_all(out: str, only: list[str], xnnpack: bool, quantize: bool = False) -> int:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch
    import torch.utils.flop_counter
    from executorch.exir import to_edge_transform_and_lower

    os.makedirs(out, exist_ok=True)
    failed = 0
    for name, (make, shape) in _models().items():
        if only and name not in only:
            continue
        torch.manual_seed(SEED)
        t0 = time.time()
        try:
            model = make().eval()
            x = torch.randn(*shape)
            with torch.no_grad():
                ref = model(x)
                # nn.MultiheadAttention's fused fast path (one native op) is invisible to the counter: vit_b_32
                # counted 5.90 GFLOP with it, 8.73 without (its attention's projections and products).
                fast_path = torch.backends.mha.get_fastpath_enabled()
                torch.backends.mha.set_fastpath_enabled(False)
                try:
                    with torch.utils.flop_counter.FlopCounterMode(display=False) as counter:
                        model(x)
                finally:
                    torch.backends.mha.set_fastpath_enabled(fast_path)
            if quantize:
                model = _quantize_static(model, x)
                with torch.no_grad():
                    ref = model(x)  # the quantized model's own output: what a quantized runtime should match
            partitioners = []
            if xnnpack:
                from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

                partitioners = [XnnpackPartitioner()]
            program = to_edge_transform_and_lower(torch.export.export(model, (x,)),
                                                  partitioner=partitioners).to_executorch()
            stem = name + ("_xnnpack" if xnnpack else "") + ("_q8" if quantize else "")
            with open(os.path.join(out, stem + ".pte"), "wb") as f:
                f.write(program.buffer)
            refs = ref if isinstance(ref, (tuple, list)) else (ref,)
            np.savez(os.path.join(out, stem + ".npz"), in0=x.numpy(), flops=np.float64(counter.get_total_flops()),
                     **{f"out{i}": r.numpy() for i, r in enumerate(refs)})
            print(f"exported {stem:32s} {len(program.buffer) / 1e6:7.1f} MB  {time.time() - t0:5.1f} s", flush=True)
        except Exception as e:  # noqa: BLE001 - report and go on to the next model
            failed += 1
            print(f"EXPORT FAILED {name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
    return 1 if failed else 0


def _names(out: str, only: list[str]) -> list[str]:
    return [n for n in sorted(f[:-4] for f in os.listdir(out) if f.endswith(".pte")) if not only or n in only]


def _inputs(out: str, name: str) -> list:
    data = np.load(os.path.join(out, name + ".npz"))
    return [data[k] for k in sorted(k for k in data.files if k.startswith("in"))]


def _median_ms(call, repeats: int) -> float:
    call()  # warm-up: first-touch of the arenas and constants
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def time_upstream(out: str, only: list[str], repeats: int) -> int:
    """Runs in the export venv: upstream portable_lib's median time per model, as JSON on stdout."""
    import json

    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    times = {}
    for name in _names(out, only):
        try:
            module = _load_for_executorch(os.path.join(out, name + ".pte"))
            ins = [torch.from_numpy(a) for a in _inputs(out, name)]
            times[name] = _median_ms(lambda: module.forward(ins), repeats)
        except Exception as e:  # noqa: BLE001
            times[name] = f"{type(e).__name__}: {str(e)[:80]}"
    print(json.dumps(times))
    return 0


def _upstream_times(python: str, out: str, only: list[str], repeats: int) -> dict:
    import json
    import subprocess

    cmd = [python, os.path.abspath(__file__), "time-upstream", "--out", out, "--repeats", str(repeats)]
    if only:
        cmd += ["--only", *only]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        print(f"upstream timing failed: {res.stderr.strip()[-300:]}")
        return {}


def run_all(out: str, only: list[str], rtol: float, atol: float, upstream: str | None, repeats: int) -> int:
    from executorch.extension.pybindings import portable_lib

    up = _upstream_times(upstream, out, only, repeats) if upstream else {}
    bad = 0
    for name in _names(out, only):
        data = np.load(os.path.join(out, name + ".npz"))
        ins = _inputs(out, name)
        refs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data.files))]
        try:
            module = portable_lib._load_for_executorch(os.path.join(out, name + ".pte"))
            outs = module.forward(ins)
            dt = _median_ms(lambda: module.forward(ins), repeats)
            errs = []
            for got, ref in zip(outs, refs):
                got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
                if got.shape != ref.shape:
                    errs.append(f"shape {got.shape} != {ref.shape}")
                    continue
                scale = max(float(np.abs(ref).max()), 1.0)
                err = float(np.abs(got.astype(np.float64) - ref).max()) / scale
                if not np.allclose(got, ref, rtol=rtol, atol=atol * scale):
                    errs.append(f"max error {err:.3g} (relative to max |ref|)")
                else:
                    errs.append(None)
            if len(outs) != len(refs):
                errs.append(f"{len(outs)} outputs, expected {len(refs)}")
            if any(errs):
                bad += 1
                print(f"MISMATCH {name}: {'; '.join(e for e in errs if e)}")
            else:
                line = f"ok       {name:32s} ours {dt:8.1f} ms"
                if isinstance(up.get(name), float):
                    line += f"   upstream {up[name]:8.1f} ms   ratio {dt / up[name]:5.2f}"
                elif name in up:
                    line += f"   upstream {up[name]}"
                print(line, flush=True)
        except Exception as e:  # noqa: BLE001
            bad += 1
            print(f"FAILED   {name}: {type(e).__name__}: {str(e)[:300]}")
            if os.environ.get("ZOO_TRACEBACK"):
                traceback.print_exc()
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["export", "run", "time-upstream"])
    ap.add_argument("--out", default="/tmp/zoo")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance, scaled by max |reference|")
    ap.add_argument("--upstream", help="a Python with upstream executorch (e.g. .venv-export/bin/python): time it too")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--xnnpack", action="store_true", help="export: lower with XnnpackPartitioner (NAME_xnnpack.pte)")
    ap.add_argument("--quantize", action="store_true",
                    help="export: PT2E static int8 per-channel (XNNPACKQuantizer) first (NAME[_xnnpack]_q8.pte)")
    a = ap.parse_args()
    if a.step == "export":
        return export_all(a.out, a.only, a.xnnpack, a.quantize)
    if a.step == "time-upstream":
        return time_upstream(a.out, a.only, a.repeats)
    return run_all(a.out, a.only, a.rtol, a.atol, a.upstream, a.repeats)


if __name__ == "__main__":
    sys.exit(main())
