"""Quantized-LLM, preprocessing, FFT and loop operators on real exported programs (tests/fixtures/quantized_ops, made
by tools/export/export_quantized_op_fixtures.py): quantized_decomposed::embedding_{byte,4bit,2bit} (.out and
.dtype_out), choose_qparams, per-token quantization, mixed_linear / mixed_mm, quantized add,
preprocess::tile_crop, aten::_fft_r2c / _fft_c2r and executorch_prim::et_copy_index (a torch.map loop).

The expected outputs are UPSTREAM's runtime's (executorch 1.5.1 with its quantized and custom-op kernels), stored
with the fixtures: no torch or executorch is needed here. Integer outputs must match exactly; real outputs within
the tolerance listed per program. Bad programs and inputs (a corrupted scale, an index out of range) must raise a
RuntimeError naming the operator, never crash.
"""
import math

import numpy as np
import pytest

from conftest import FIXTURES, to_numpy

DIR = FIXTURES.parent / "quantized_ops"

# (rtol, atol) for real outputs. Embeddings, tile_crop, the loop and the qparams compute exactly what upstream
# does; mixed matmuls may differ by float summation contraction; FFTs use another algorithm (Note [fft algorithm]).
TOLERANCE = {
    "embedding_byte": (0, 0), "embedding_byte_group": (0, 0), "embedding_byte_fp16": (0, 0),
    "embedding_4bit": (0, 0), "embedding_4bit_group": (0, 0), "embedding_2bit": (0, 0),
    "embedding_2bit_group": (0, 0),
    "per_token": (1e-12, 0), "choose_qparams": (1e-12, 0), "quantized_add": (0, 0),
    "mixed_linear": (1e-5, 1e-6), "mixed_mm": (1e-5, 1e-6),
    "tile_crop": (0, 0), "tile_crop_2tiles": (0, 0),
    "fft_1d": (1e-5, 1e-5), "fft_2d": (1e-5, 1e-5), "fft_f64": (1e-12, 1e-13),
    "map_loop": (1e-6, 1e-6),
}
OPERATORS = {
    "embedding_byte": ["quantized_decomposed::embedding_byte.out"],
    "embedding_byte_group": ["quantized_decomposed::embedding_byte.dtype_out"],
    "embedding_4bit": ["quantized_decomposed::embedding_4bit.out"],
    "embedding_4bit_group": ["quantized_decomposed::embedding_4bit.dtype_out"],
    "embedding_2bit": ["quantized_decomposed::embedding_2bit.out"],
    "embedding_2bit_group": ["quantized_decomposed::embedding_2bit.dtype_out"],
    "per_token": ["quantized_decomposed::choose_qparams_per_token_asymmetric.out",
                  "quantized_decomposed::quantize_per_token.out", "quantized_decomposed::dequantize_per_token.out"],
    "choose_qparams": ["quantized_decomposed::choose_qparams.Tensor_out"],
    "quantized_add": ["quantized_decomposed::add.out"],
    "mixed_linear": ["quantized_decomposed::mixed_linear.out"],
    "mixed_mm": ["quantized_decomposed::mixed_mm.out"],
    "tile_crop": ["preprocess::tile_crop.out"],
    "fft_1d": ["aten::_fft_r2c.out", "aten::_fft_c2r.out"],
    "map_loop": ["executorch_prim::et_copy_index.tensor"],
}


def cases(name):
    z = np.load(DIR / f"{name}.npz")
    k = 0
    while f"case{k}_in0" in z:
        ins = [z[f"case{k}_in{i}"] for i in range(8) if f"case{k}_in{i}" in z]
        outs = [z[f"case{k}_out{j}"] for j in range(8) if f"case{k}_out{j}" in z]
        yield ins, outs
        k += 1


def check(name, got, want):
    rtol, atol = TOLERANCE[name]
    assert len(got) == len(want)
    for j, (g, w) in enumerate(zip(got, want)):
        g = to_numpy(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (name, j, g.shape, w.shape, g.dtype, w.dtype)
        if np.issubdtype(w.dtype, np.integer) or (rtol, atol) == (0, 0):
            np.testing.assert_array_equal(g, w, err_msg=f"{name} output {j}")
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{name} output {j}")


@pytest.mark.parametrize("name", sorted(TOLERANCE))
def test_matches_upstream_runtime(portable_lib, name):
    m = portable_lib._load_for_executorch(str(DIR / f"{name}.pte"))
    n = 0
    for ins, want in cases(name):
        check(name, m.forward([np.array(x, order="C") for x in ins]), want)
        n += 1
    assert n >= 2


def test_operators_are_registered(portable_lib):
    names = set(portable_lib._get_operator_names())
    for ops in OPERATORS.values():
        for op in ops:
            assert op in names, op
    for op in ["quantized_decomposed::embedding_byte.dtype_out", "quantized_decomposed::embedding_4bit.out"]:
        assert op in names


def test_map_loop_output_follows_the_iteration_count(portable_lib):
    """et_copy_index grows the loop's output row by row: a later call with fewer rows gets fewer rows back."""
    m = portable_lib._load_for_executorch(str(DIR / "map_loop.pte"))
    shapes = []
    for ins, want in cases("map_loop"):
        got = to_numpy(m.forward([np.array(x, order="C") for x in ins])[0])
        shapes.append(got.shape[0])
        np.testing.assert_allclose(got, want[0], rtol=1e-6, atol=1e-6)
    assert shapes == [4, 2, 3, 1]


def test_per_token_special_tokens(portable_lib):
    """The third per-token case holds an all-zero token (upstream falls back to scale 0.1, zero point 127) and a
    tiny-range token (scale raised to 6.1e-5): both where upstream and torch eager disagree."""
    ins, want = list(cases("per_token"))[2]
    scale = want[0]
    assert scale[0, 1, 0] == 0.1 and want[1][0, 1, 0] == 127
    assert scale[1, 2, 0] == np.float64(np.float32(6.1e-5))
    m = portable_lib._load_for_executorch(str(DIR / "per_token.pte"))
    check("per_token", m.forward([ins[0]]), want)


# ---- bad programs and inputs: errors naming the operator, never a crash -------------------------------------------

def corrupt_scale(tmp_path, name, value):
    """A copy of NAME.pte whose first weight scale (found by its bytes) is replaced by `value`."""
    data = bytearray((DIR / f"{name}.pte").read_bytes())
    scales = np.load(DIR / f"{name}.npz")["meta_scales"]
    blob = scales.tobytes()
    at = data.find(blob)
    assert at >= 0 and data.find(blob, at + 1) < 0, "the scale buffer must appear exactly once"
    data[at:at + scales.itemsize] = np.array([value], dtype=scales.dtype).tobytes()
    path = tmp_path / f"{name}_bad.pte"
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("name,op", [("embedding_4bit", "embedding_4bit.out"),
                                     ("embedding_byte_group", "embedding_byte.dtype_out"),
                                     ("embedding_4bit_group", "embedding_4bit.dtype_out")])
@pytest.mark.parametrize("value", [0.0, -0.5, math.nan, math.inf])
def test_corrupt_scale_is_an_error_naming_the_op(portable_lib, tmp_path, name, op, value):
    m = portable_lib._load_for_executorch(str(corrupt_scale(tmp_path, name, value)))
    ins, want = next(cases(name))
    idx = np.zeros_like(ins[0])  # row 0 holds the corrupted scale
    with pytest.raises(RuntimeError, match=rf"quantized_decomposed::{op}.*not a positive finite scale"):
        m.forward([idx])
    # Rows whose scales are intact still work (the error is per row looked up, the program stays usable).
    rows = np.full_like(ins[0], 5)
    got = to_numpy(m.forward([rows])[0])
    ok = portable_lib._load_for_executorch(str(DIR / f"{name}.pte"))
    np.testing.assert_array_equal(got, to_numpy(ok.forward([rows])[0]))


@pytest.mark.parametrize("name,op", [("embedding_byte", "embedding_byte.out"),
                                     ("embedding_2bit_group", "embedding_2bit.dtype_out")])
@pytest.mark.parametrize("bad", [16, -1, 2**40])
def test_index_out_of_range_is_an_error_naming_the_op(portable_lib, name, op, bad):
    m = portable_lib._load_for_executorch(str(DIR / f"{name}.pte"))
    ins, want = next(cases(name))
    idx = ins[0].copy()
    if not np.can_cast(np.min_scalar_type(bad), idx.dtype):
        bad = np.iinfo(idx.dtype).max
    idx[1, 2] = bad
    with pytest.raises(RuntimeError, match=rf"quantized_decomposed::{op}.*index {bad} is out of range for 16"):
        m.forward([idx])
    check(name, m.forward([ins[0]]), want)  # the next call is fine


def test_wrong_index_dtype_is_refused(portable_lib):
    m = portable_lib._load_for_executorch(str(DIR / "embedding_byte.pte"))
    ins, _ = next(cases("embedding_byte"))
    with pytest.raises(RuntimeError, match="input 0"):
        m.forward([ins[0].astype(np.float32)])


def test_choose_qparams_rejects_non_finite_input(portable_lib):
    m = portable_lib._load_for_executorch(str(DIR / "choose_qparams.pte"))
    x = np.ones((4, 8), np.float32)
    x[2, 3] = np.nan
    with pytest.raises(RuntimeError, match="choose_qparams.Tensor_out.*non-finite"):
        m.forward([x])
    m2 = portable_lib._load_for_executorch(str(DIR / "per_token.pte"))
    y = np.ones((2, 3, 16), np.float32)
    y[1, 1, 1] = np.inf
    with pytest.raises(RuntimeError, match="choose_qparams_per_token_asymmetric.out.*non-finite"):
        m2.forward([y])


def test_tile_crop_beyond_the_tile_bound_is_refused(portable_lib):
    """The exported output holds at most 4 tiles (upstream's fake's bound); the program was exported for [3, 8, 8]."""
    m = portable_lib._load_for_executorch(str(DIR / "tile_crop.pte"))
    with pytest.raises(RuntimeError, match="input 0"):
        m.forward([np.zeros((3, 12, 12), np.float32)])
