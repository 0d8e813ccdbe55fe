"""PT2E-quantized programs (XNNPACKQuantizer, per-channel weights; static and dynamic activations), lowered to XNNPACK
and not lowered (tests/fixtures/xnnpack_quantized, made by tools/export/export_quantized_xnnpack_fixtures.py), against
upstream's runtime on the same files.

Tolerance: static programs produce values on their output's quantization grid; the float emulation of XNNPACK's
integer kernels may put a value that sits within float error of a rounding midpoint on the neighbouring step, so
an element may differ by one output step (at most 1% of them), never more. Dynamic programs have float outputs."""
import json

import numpy as np
import pytest

from conftest import FIXTURES, to_numpy

QX = FIXTURES.parent / "xnnpack_quantized"
MANIFEST = json.loads((QX / "manifest.json").read_text())["fixtures"]


def load_cases(name):
    """(inputs, upstream outputs) of every call, in order: the main case, then the other sizes of a dynamic batch."""
    z = np.load(QX / f"{name}.npz")
    cases = [([z[f"in{i}"] for i in range(8) if f"in{i}" in z], [z[f"out{j}"] for j in range(8) if f"out{j}" in z])]
    k = 0
    while f"case{k}_in0" in z:
        cases.append(([z[f"case{k}_in{i}"] for i in range(8) if f"case{k}_in{i}" in z],
                      [z[f"case{k}_out{j}"] for j in range(8) if f"case{k}_out{j}" in z]))
        k += 1
    return cases


def load_case(name):
    return load_cases(name)[0]


def grid_step(values):
    """The quantization step of values that lie on one grid: the smallest gap between distinct values."""
    u = np.unique(values.astype(np.float64))
    return float(np.diff(u).min()) if u.size > 1 else 0.0


def check_close(name, got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = to_numpy(g)
        assert g.shape == w.shape and g.dtype == w.dtype
        if MANIFEST[name]["dynamic"]:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
            continue
        step = grid_step(w)
        err = np.abs(g.astype(np.float64) - w)
        assert err.max() <= step * 1.001 + 1e-7, (name, err.max(), step)
        assert (err > 1e-6).mean() <= 0.01, (name, (err > 1e-6).mean())


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_matches_upstream(portable_lib, name):
    module = portable_lib._load_for_executorch(str(QX / f"{name}.pte"))
    cases = load_cases(name)
    assert len(cases) == 1 + len(MANIFEST[name].get("sizes", []))
    for ins, want in cases:  # one module: the batch changes between calls on dynamic-shape programs
        check_close(name, module.forward(ins), want)


_RUN_TO_NPY = """
import sys, numpy as np
from executorch.extension.pybindings import portable_lib as pl
z = np.load(sys.argv[1])
out = pl._load_for_executorch(sys.argv[2]).forward([z["in0"]])[0]
np.save(sys.argv[3], np.asarray(out))
"""


def _int8_kernels_here():
    """Whether this process runs the int8 GEMM (AVX-512 VNNI, not capped by ETRT_ISA), where byte activations apply."""
    import os
    import platform
    if platform.machine() not in ("x86_64", "AMD64") or os.environ.get("ETRT_ISA", "amx") not in ("amx", "avx512vnni"):
        return False
    try:
        return "avx512_vnni" in open("/proc/cpuinfo").read()
    except OSError:
        return False


@pytest.mark.parametrize("name", ["q_mobilenet_stage_xnnpack", "q_efficientnet_stage_xnnpack", "q_gelu_mlp_xnnpack",
                                  "q_resnet_stem_xnnpack"])
def test_byte_activations_setting_keeps_upstreams_results(portable_lib, tmp_path, name):
    """The stage fixtures hold their int8 activations as bytes by default (Note [byte activations]);
    ETRT_BYTE_ACTIVATIONS=0 holds them as floats on their grids (and the GELU and tanh chains of q_gelu_mlp then run
    block by block instead of as tables of 256 bytes, Note [xnnpack activation chain]). Both match upstream's outputs within the fixtures'
    tolerance and each other within one step; on the int8 kernels (AVX-512 VNNI) the default is upstream's output
    bit for bit (Note [xnnpack requantization]: the same integer sums, scaled and rounded as XNNPACK does)."""
    import os
    import subprocess
    import sys

    ins, want = load_case(name)
    default = to_numpy(portable_lib._load_for_executorch(str(QX / f"{name}.pte")).forward(ins)[0])
    env = dict(os.environ, ETRT_BYTE_ACTIVATIONS="0")
    out = tmp_path / "floats.npy"
    r = subprocess.run([sys.executable, "-c", _RUN_TO_NPY, str(QX / f"{name}.npz"), str(QX / f"{name}.pte"), str(out)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    floats = np.load(out)
    check_close(name, [default], want)
    check_close(name, [floats], want)
    assert np.abs(default - floats).max() <= grid_step(want[0]) * 1.001 + 1e-7
    if _int8_kernels_here():
        assert np.array_equal(default, want[0]), (name, int((default != want[0]).sum()))


def test_lowered_and_unlowered_agree(portable_lib):
    """The same quantized model through XNNPACK and through the portable quantized kernels."""
    for model in ("mlp", "cnn"):
        ins, _ = load_case(f"q_{model}_static_xnnpack")
        a = to_numpy(portable_lib._load_for_executorch(str(QX / f"q_{model}_static_xnnpack.pte")).forward(ins)[0])
        b = to_numpy(portable_lib._load_for_executorch(str(QX / f"q_{model}_static_portable.pte")).forward(ins)[0])
        step = grid_step(b)
        assert np.abs(a - b).max() <= step * 1.001 + 1e-7


def test_payloads_hold_the_quantized_kinds():
    """The fixtures exercise what the issue names: static qint8 activations, per-channel weights and biases,
    dynamic per-token activations."""
    summary = " ".join(" ".join(MANIFEST[n]["xnnpack"]) for n in MANIFEST)
    for kind in ("qint8:PerTensorQuant", "qcint8:PerChannelQuant", "qcint32:PerChannelQuant",
                 "qdint8:PerTokenDynamicQuant", "XNNDepthwiseConv2d", "XNNAdd", "XNNMaxPooling2d"):
        assert kind in summary, kind


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_scale_is_refused_with_its_value(portable_lib, bad):
    import struct
    pte = (QX / "q_mlp_static_xnnpack.pte").read_bytes()
    patched = 0
    for s in MANIFEST["q_mlp_static_xnnpack"]["per_tensor_scales"]:
        key = struct.pack("<f", s)
        if key in pte:
            pte = pte.replace(key, struct.pack("<f", bad), 1)
            patched += 1
    assert patched >= 1, "no activation scale of the fixture was found in its bytes"
    with pytest.raises(RuntimeError, match="quantization scale"):
        m = portable_lib._load_for_executorch_from_buffer(pte)
        m.forward(load_case("q_mlp_static_xnnpack")[0])
