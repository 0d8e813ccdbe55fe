"""The llama:: custom operators (upstream's LLM custom-op library) against upstream's runtime.

tests/fixtures/llm_ops holds programs made with the real exporter by tools/export/export_llm_op_fixtures.py, each run
by upstream's runtime as a sequence of calls: KV caches are mutable buffers, so a decode step's output depends on what
the prefill and the earlier steps left in them. Here every program runs the same calls in the same order on one
loaded module and must reproduce upstream's outputs. Bad inputs (a start_pos past the cache, an index out of range)
must raise a RuntimeError naming the operator and leave the module usable.
"""
import numpy as np
import pytest

from conftest import FIXTURES, to_numpy

LLM_OPS = FIXTURES.parent / "llm_ops"

# rtol/atol 1e-5 for float32 (0: bit-exact copies). Measured against upstream's outputs the largest differences are
# ~5e-7 for attention and the gated delta rule (upstream's prefill uses a chunked form that sums in another order;
# the recurrence here is exact), ~9e-6 for the MoE outputs (values up to ~40, float dot products in another order
# than upstream's GEMM), 0 for the Hadamard transform.
PROGRAMS = {
    "update_cache": 0.0,
    "update_cache_with_indices": 0.0,
    "custom_sdpa_gqa": 1e-5,
    "sdpa_with_kv_cache": 1e-5,
    "custom_sdpa_scaled": 1e-5,
    "custom_sdpa_masked": 1e-5,
    "custom_quantized_sdpa": 1e-5,
    "custom_quantized_sdpa_seq2": 1e-5,
    "fast_hadamard_transform": 1e-5,
    "fallback": 0.0,
    "gated_delta_rule": 1e-5,
    "channelwise_gated_delta_rule": 1e-5,
    "quantized_moe_ffn_4bit_sigmoid": 1e-5,
    "quantized_moe_ffn_8bit_softmax": 1e-5,
}


def calls(name):
    z = np.load(LLM_OPS / f"{name}.npz")
    k = 0
    while f"case{k}_in0" in z:
        ins = [z[f"case{k}_in{i}"] for i in range(16) if f"case{k}_in{i}" in z]
        outs = [z[f"case{k}_out{j}"] for j in range(8) if f"case{k}_out{j}" in z]
        yield ins, outs
        k += 1


def load(portable_lib, name):
    return portable_lib._load_for_executorch(str(LLM_OPS / f"{name}.pte"))


def check(got, want, tol, where):
    assert len(got) == len(want), where
    for g, w in zip(got, want):
        g = to_numpy(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (where, g.shape, w.shape, g.dtype, w.dtype)
        if tol == 0.0:
            np.testing.assert_array_equal(g, w, err_msg=where)
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=where)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_call_sequence_matches_upstream(portable_lib, name):
    m = load(portable_lib, name)
    n = 0
    for k, (ins, want) in enumerate(calls(name)):
        check(m.forward([np.array(x, order="C") for x in ins]), want, PROGRAMS[name], f"{name} call {k}")
        n += 1
    assert n >= 2


def test_operators_are_registered(portable_lib):
    names = set(portable_lib._get_operator_names())
    for op in ["update_cache.out", "update_cache_with_indices.out", "custom_sdpa.out", "sdpa_with_kv_cache.out",
               "custom_quantized_sdpa.out", "fast_hadamard_transform.out", "fallback.out", "gated_delta_rule.out",
               "channelwise_gated_delta_rule.out", "quantized_moe_ffn.out"]:
        assert f"llama::{op}" in names, op


def test_fixtures_are_small():
    for name in PROGRAMS:
        for ext in ("pte", "npz"):
            assert (LLM_OPS / f"{name}.{ext}").stat().st_size < 200_000, (name, ext)


def attention_inputs(s, pos, h=4, hkv=2, d=8):
    rng = np.random.default_rng(s + pos)
    return [rng.standard_normal((1, s, h, d), dtype=np.float32), rng.standard_normal((1, s, hkv, d), dtype=np.float32),
            rng.standard_normal((1, s, hkv, d), dtype=np.float32), np.array([pos], np.int64)]


@pytest.mark.parametrize("name,op", [("custom_sdpa_gqa", "llama::update_cache"),
                                     ("sdpa_with_kv_cache", "llama::sdpa_with_kv_cache")])
def test_start_pos_past_the_cache_is_an_error(portable_lib, name, op):
    m = load(portable_lib, name)
    with pytest.raises(RuntimeError, match=f"{op}.*start_pos 14 \\+ seq_len 5 exceeds"):
        m.forward(attention_inputs(5, 14))
    with pytest.raises(RuntimeError, match=f"{op}.*start_pos 16"):
        m.forward(attention_inputs(1, 16))
    with pytest.raises(RuntimeError, match=f"{op}.*start_pos -1 is negative"):
        m.forward(attention_inputs(1, -1))
    # The module is still usable, and the refused calls wrote nothing: the sequence still matches upstream.
    for k, (ins, want) in enumerate(calls(name)):
        check(m.forward([np.array(x, order="C") for x in ins]), want, 1e-5, f"{name} call {k} after errors")


def test_custom_sdpa_past_the_cache_is_an_error(portable_lib):
    m = load(portable_lib, "custom_sdpa_scaled")
    q, k, v, _ = next(calls("custom_sdpa_scaled"))[0]
    with pytest.raises(RuntimeError, match="llama::custom_sdpa.*exceeds the key/value cache length 16"):
        m.forward([q, k, v, np.array([13], np.int64)])  # 4 query rows from 13


def test_index_out_of_range_is_an_error_and_changes_nothing(portable_lib):
    m = load(portable_lib, "update_cache_with_indices")
    ins, want = next(calls("update_cache_with_indices"))
    full = to_numpy(m.forward(ins)[0])
    np.testing.assert_array_equal(full, want[0])
    value = np.ones((2, 2, 3, 4), np.float32)
    for bad in (8, -1):
        with pytest.raises(RuntimeError, match=f"llama::update_cache_with_indices.*index {bad} .*out of range"):
            m.forward([value, np.array([[0, 1], [2, bad]], np.int64), np.array([0], np.int64)])
    # A valid one-row update: everything else is as the first call left it.
    got = to_numpy(m.forward([value[:, :1] * 5, np.array([[3], [4]], np.int64), np.array([0], np.int64)])[0])
    full[0, 3] = 5
    full[1, 4] = 5
    np.testing.assert_array_equal(got, full)


def test_update_cache_writes_only_the_new_rows(portable_lib):
    m = load(portable_lib, "update_cache")
    ins, want = next(calls("update_cache"))
    first = [to_numpy(x) for x in m.forward(ins)]
    rng = np.random.default_rng(0)
    value = rng.standard_normal((2, 2, 3, 4), dtype=np.float32)
    value_i8 = rng.integers(-128, 127, (2, 2, 3, 1), dtype=np.int8)
    got = [to_numpy(x) for x in m.forward([value, value_i8, np.array([6], np.int64)])]
    first[0][:, 6:8] = value
    first[1][:, 6:8] = value_i8
    np.testing.assert_array_equal(got[0], first[0])
    np.testing.assert_array_equal(got[1], first[1])
    with pytest.raises(RuntimeError, match="llama::update_cache.*start_pos 7 \\+ seq_len 2 exceeds the cache length 8"):
        m.forward([value, value_i8, np.array([7], np.int64)])
