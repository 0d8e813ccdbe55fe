"""The project's own fixtures (made by tools/export/export_fixtures.py with the real exporter) run with the
expected outputs recorded from torch eager, and every bundled program verifies."""
import numpy as np
import pytest

from conftest import FIXTURES, to_numpy

import json

MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
FIXTURE_LIST = MANIFEST["fixtures"]


def load_case(fx):
    z = np.load(FIXTURES / fx["files"]["npz"])
    meta = fx["methods"][fx["main_method"]]
    kinds = [e["type"] for e in meta["eager_inputs"][0]]
    bf16 = set(fx["npz"]["bf16_as_uint16"])
    inputs = []
    for i, kind in enumerate(kinds):
        v = z[f"in{i}"]
        if kind == "int":
            inputs.append(int(v))
        elif kind == "float":
            inputs.append(float(v))
        elif f"in{i}" in bf16:
            inputs.append(np.ascontiguousarray(v).view(np.uint8))  # raw bytes take the method's shape
        else:
            inputs.append(np.ascontiguousarray(v))
    outputs = [z[k] for k in sorted((k for k in z.files if k.startswith("out")), key=lambda k: int(k[3:]))]
    return inputs, outputs, bf16


def as_float(name, arr, bf16):
    if name in bf16:
        return (np.asarray(arr).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(arr)


@pytest.mark.parametrize("fx", FIXTURE_LIST, ids=[f["name"] for f in FIXTURE_LIST])
def test_fixture_matches_eager(portable_lib, fx):
    m = portable_lib._load_for_executorch(str(FIXTURES / fx["files"]["pte"]))
    inputs, expected, bf16 = load_case(fx)
    outs = m.run_method(fx["main_method"], inputs)
    assert len(outs) == len(expected)
    tol = fx["tolerance"]
    for k, (got, exp) in enumerate(zip(outs, expected)):
        if f"out{k}" in bf16:
            g = as_float(f"out{k}", bf16_bits(got).reshape(exp.shape), bf16)
            exp = as_float(f"out{k}", exp, bf16)
        else:
            g = to_numpy(got)
        assert g.shape == exp.shape, (g.shape, exp.shape)
        np.testing.assert_allclose(g, exp, rtol=tol["rtol"], atol=tol["atol"])


def bf16_bits(x):
    """The uint16 bit patterns of a bfloat16 output (torch tensor, or ExecuTorchResult's flat bytes)."""
    if hasattr(x, "detach"):
        import torch
        return x.detach().contiguous().view(torch.int16).numpy().view(np.uint16)
    assert x.dtype_name == "bfloat16"
    return np.asarray(x).view(np.uint16)


@pytest.mark.parametrize("fx", FIXTURE_LIST, ids=[f["name"] for f in FIXTURE_LIST])
def test_bundled_fixture_verifies(portable_lib, fx):
    b = portable_lib._load_bundled_program_from_buffer((FIXTURES / fx["files"]["bpte"]).read_bytes())
    tol = fx["tolerance"]
    for method in fx["method_names"]:
        n = fx["methods"][method]["num_test_cases"]
        for i in range(n):
            b.verify_result_with_bundled_expected_output(method, i, rtol=max(tol["rtol"], 1e-5),
                                                         atol=max(tol["atol"], 1e-6))


def test_stateful_buffer_accumulates(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "stateful.pte"))
    x = np.ones(3, np.float32)
    m.forward([x])
    out = m.forward([x])
    np.testing.assert_array_equal(to_numpy(out[0]), [2, 2, 2])


def test_two_methods(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "two_methods.pte"))
    assert sorted(m.method_names()) == ["forward", "times_two"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3) if m.method_meta("times_two").input_tensor_meta(0).sizes() == (2, 3) \
        else np.ones(m.method_meta("times_two").input_tensor_meta(0).sizes(), np.float32)
    np.testing.assert_allclose(to_numpy(m.run_method("times_two", [x])[0]), 2 * x)


def test_dynamic_cat_within_bounds(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "dynamic_cat.pte"))
    for b in (1, 5, 8):
        x = np.full((b, 3), 1, np.float32)
        y = np.full((b, 3), 2, np.float32)
        out = to_numpy(m.forward([x, y])[0])
        assert out.shape == (2 * b, 3)
        np.testing.assert_array_equal(out, np.concatenate([x, y]))
    with pytest.raises(RuntimeError, match="upper bound"):
        m.forward([np.ones((9, 3), np.float32), np.ones((9, 3), np.float32)])
