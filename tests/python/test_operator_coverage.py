"""The operators upstream's users have (executorch 1.5.1's portable_lib with its quantized and LLM custom-op
libraries loaded; tests/python/data/upstream_operator_names.txt, written by tools/export/dump_upstream_operators.py)
against ours. NOT_YET lists what is still missing, each with why; the test fails when an upstream operator is missing
without being listed, and when a listed one has landed (so the list shrinks as the work lands and stays true)."""
import pathlib

DATA = pathlib.Path(__file__).parent / "data" / "upstream_operator_names.txt"

NOT_YET = {
    # FFT (complex outputs from real inputs and back): no kernels yet.
    "aten::_fft_c2r.out", "aten::_fft_r2c.out",
    # Loops of torch.cond / torch.map: needs a copy-into-index kernel and its resize rule.
    "executorch_prim::et_copy_index.tensor",
    # LLM custom ops (KV cache, SDPA and their quantized / ring-buffer variants, MoE, gated delta rules).
    "llama::channelwise_gated_delta_rule.out", "llama::custom_quantized_sdpa.out", "llama::custom_sdpa.out",
    "llama::fallback.out", "llama::fast_hadamard_transform.out", "llama::gated_delta_rule.out",
    "llama::quantized_moe_ffn.out", "llama::sdpa_with_kv_cache.out", "llama::update_cache.out",
    "llama::update_cache_with_indices.out",
    # Image preprocessing of multimodal LLMs.
    "preprocess::tile_crop.out",
    # Quantized embeddings, per-token (dynamic) quantization and mixed-precision matmuls of quantized LLMs.
    "quantized_decomposed::add.out", "quantized_decomposed::choose_qparams.Tensor_out",
    "quantized_decomposed::choose_qparams_per_token_asymmetric.out", "quantized_decomposed::dequantize_per_token.out",
    "quantized_decomposed::embedding_2bit.dtype_out", "quantized_decomposed::embedding_2bit.out",
    "quantized_decomposed::embedding_4bit.dtype_out", "quantized_decomposed::embedding_4bit.out",
    "quantized_decomposed::embedding_byte.dtype_out", "quantized_decomposed::embedding_byte.out",
    "quantized_decomposed::mixed_linear.out", "quantized_decomposed::mixed_mm.out",
    "quantized_decomposed::quantize_per_token.out",
}


def upstream_names():
    return {line.strip() for line in DATA.read_text().splitlines() if line.strip() and not line.startswith("#")}


def test_every_upstream_operator_is_registered_or_listed(portable_lib):
    ours = set(portable_lib._get_operator_names())
    missing = upstream_names() - ours
    unlisted = sorted(missing - NOT_YET)
    assert not unlisted, f"upstream operators missing here and not in NOT_YET: {unlisted}"
    landed = sorted(NOT_YET - missing)
    assert not landed, f"these landed: remove them from NOT_YET: {landed}"


def test_the_upstream_list_is_complete():
    names = upstream_names()
    assert len(names) == 270
    assert "aten::add.out" in names and "executorch_prim::et_view.default" in names
