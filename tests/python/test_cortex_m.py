"""Cortex-M (CMSIS-NN flow) programs: the cortex_m:: kernels against the wheel's reference implementations.

Fixtures: tests/fixtures/cortex_m (tools/export/export_cortex_m_fixtures.py). Upstream's pip runtime registers no
cortex_m:: kernels, so the expected outputs are the wheel's Python reference ops run on the same quantized graph
(manifest.json says so per fixture). Integer outputs must match bit for bit, float outputs (after a final
dequantize) within 1e-6.
"""
import json
import pathlib
import struct

import numpy as np
import pytest

import pte_edit
from conftest import to_numpy, torch_available

CM = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "cortex_m"
MANIFEST = json.loads((CM / "manifest.json").read_text())
NAMES = sorted(MANIFEST["fixtures"])
TAG_INT = 2  # EValue union tag of an Int (program.fbs KernelTypes)
KWS_OPS = {
    "cortex_m::quantize_per_tensor.out", "cortex_m::quantized_depthwise_conv2d.out", "cortex_m::quantized_conv2d.out",
    "cortex_m::pad.out", "cortex_m::quantized_avg_pool2d.out", "cortex_m::quantized_linear.out",
    "cortex_m::dequantize_per_tensor.out",
}


def load_case(name):
    z = np.load(CM / f"{name}.npz")
    ins = [z[k] for k in sorted((k for k in z.files if k.startswith("x")), key=lambda k: int(k[1:]))]
    outs = [z[k] for k in sorted((k for k in z.files if k.startswith("y")), key=lambda k: int(k[1:]))]
    return ins, outs


def as_inputs(arrays):
    """Channels-last inputs, as the programs declare them (torch tensors when torch is there)."""
    if torch_available():
        import torch
        return [torch.from_numpy(a).to(memory_format=torch.channels_last) if a.ndim == 4 else torch.from_numpy(a)
                for a in arrays]
    return list(arrays)


def test_kernels_registered(portable_lib):
    names = set(portable_lib._get_operator_names())
    assert KWS_OPS <= names
    for fx in MANIFEST["fixtures"].values():
        assert set(fx["operators"]) <= names, set(fx["operators"]) - names


def test_every_operator_of_the_wheels_cortex_m_library_is_registered(portable_lib):
    # The wheel's backends/cortex_m/ops/operators.yaml, recorded by the fixture script.
    wheel = set(MANIFEST["wheel_operators_yaml"])
    assert len(wheel) >= 23 and "cortex_m::softmax.out" in wheel
    assert wheel <= set(portable_lib._get_operator_names()), wheel - set(portable_lib._get_operator_names())


def test_kws_fixture_uses_the_issue_ops():
    assert KWS_OPS <= set(MANIFEST["fixtures"]["kws_dscnn"]["operators"])


@pytest.mark.parametrize("name", NAMES)
def test_fixture_matches_reference(portable_lib, name):
    ins, expected = load_case(name)
    m = portable_lib._load_for_executorch(str(CM / f"{name}.pte"))
    for _ in range(2):
        outs = m.forward(as_inputs(ins))
        assert len(outs) == len(expected)
        for got, exp in zip(outs, expected):
            g = to_numpy(got)
            assert g.shape == exp.shape and g.dtype == exp.dtype, (g.shape, g.dtype, exp.shape, exp.dtype)
            if exp.dtype.kind == "f":
                np.testing.assert_allclose(g, exp, rtol=0, atol=1e-6)
            else:
                np.testing.assert_array_equal(g, exp)


def _int_values(buf):
    """(position of int_val, value) of every Int EValue of plan 0."""
    out = []
    for ev in pte_edit.plan(buf).tables(pte_edit.PLAN_VALUES):
        if ev.scalar(pte_edit.EVALUE_VAL_TYPE, "<B") != TAG_INT:
            continue
        t = ev.table(pte_edit.EVALUE_VAL)
        p = t.field_pos(0) if t else None
        if p is not None:
            out.append((p, struct.unpack_from("<q", buf, p)[0]))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_corrupt_scalars_fail_cleanly(portable_lib, name):
    """Every Int argument overwritten with an out-of-range multiplier, shift or zero point: a RuntimeError naming a
    cortex_m op (or another kernel's clean error), never a crash or a silent wrong size."""
    data = (CM / f"{name}.pte").read_bytes()
    ins, _ = load_case(name)
    ints = _int_values(bytearray(data))
    assert ints
    named = {"multiplier": 0, "shift": 0, "zero_point": 0}
    for pos, old in ints:
        for bad in (1 << 40, -40, 1000):
            buf = bytearray(data)
            struct.pack_into("<q", buf, pos, bad)
            try:
                m = portable_lib._load_for_executorch_from_buffer(bytes(buf))
                m.forward(as_inputs(ins))
            except RuntimeError as e:
                msg = str(e)
                if "cortex_m::" in msg:
                    for k in named:
                        if k in msg or (k == "zero_point" and "offset" in msg):
                            named[k] += 1
    assert named["multiplier"] > 0 and named["zero_point"] > 0, named
    if name == "kws_dscnn":
        assert named["shift"] > 0, named


def test_corpus_arduino_add_model(portable_lib, corpus):
    """The shared corpus's Arduino program: plain aten add (no cortex_m ops), x + 1."""
    path = corpus / "arduino_add_model.pte"
    if not path.exists():
        pytest.skip(f"{path} not in the shared corpus")
    m = portable_lib._load_for_executorch(str(path))
    out = to_numpy(m.forward([np.array([1, 2, 3], dtype=np.float32)])[0])
    np.testing.assert_array_equal(out, np.array([2, 3, 4], dtype=np.float32))
