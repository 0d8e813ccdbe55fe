"""Fixtures for the llama:: custom operators (upstream's LLM custom-op library), made with the real exporter and run
with upstream's runtime (.venv-export: torch + executorch from PyPI).

    .venv-export/bin/python tools/export/export_llm_op_fixtures.py [--only NAME ...]   # writes tests/fixtures/llm_ops/

Each program is a small torch module calling torch.ops.llama.*, exported with torch.export and
to_edge_transform_and_lower(...).to_executorch() (the llama ops stay custom ops, as in upstream's export_llm). KV
caches are registered buffers, so they become mutable buffers of the program whose contents persist between calls:
every program is run as a sequence of calls (a prefill of several tokens, single-token decode steps, a later chunk),
and the later outputs depend on what the earlier calls left in the caches.

For each NAME: NAME.pte and NAME.npz holding, for every call k in order, its inputs case{k}_in{i} and upstream's
outputs case{k}_out{j} (upstream's runtime: executorch.extension.pybindings.portable_lib with the custom-op kernels
registered by importing executorch.extension.llm.custom_ops.custom_ops).
"""
import argparse
import pathlib

import numpy as np
import torch
from torch.export import Dim

import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (torch.ops.llama.* and their kernels)
import executorch.extension.llm.custom_ops.op_fallback  # noqa: F401  (llama::fallback)
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "llm_ops"
GEN = torch.Generator().manual_seed(1234)


def randn(*shape, scale=1.0):
    return torch.randn(*shape, generator=GEN) * scale


def pos(p):
    return torch.tensor([p], dtype=torch.long)


def start_pos(input_pos, seq_len, max_len):
    """input_pos[0] as an unbacked SymInt the exporter can bound (as upstream's llama attention does)."""
    sp = input_pos[0].item()
    torch._check_is_size(sp)
    torch._check(sp + seq_len <= max_len)
    return sp


# ---- KV cache updates ---------------------------------------------------------------------------------------------

class UpdateCache(torch.nn.Module):
    """update_cache on a float cache and an int8 cache (bytewise copies); returns snapshots of both caches."""

    L = 8

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, self.L, 3, 4))
        self.register_buffer("cache_i8", torch.zeros(2, self.L, 3, 1, dtype=torch.int8))

    def forward(self, value, value_i8, input_pos):
        sp = start_pos(input_pos, value.size(1), self.L)
        torch.ops.llama.update_cache(value, self.cache, sp)
        torch.ops.llama.update_cache(value_i8, self.cache_i8, sp)
        return self.cache + 0, self.cache_i8 + 0


def update_cache_calls():
    calls = []
    for p, s in [(0, 8), (2, 3), (7, 1), (5, 2), (0, 1)]:  # the first call fills the whole cache
        calls.append((randn(2, s, 3, 4), torch.randint(-128, 127, (2, s, 3, 1), dtype=torch.int8, generator=GEN),
                      pos(p)))
    return calls


class UpdateCacheWithIndices(torch.nn.Module):
    L = 8

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, self.L, 3, 4))

    def forward(self, value, indices, input_pos):
        sp = input_pos[0].item()
        torch._check_is_size(sp)
        torch.ops.llama.update_cache_with_indices(value, self.cache, sp, indices)
        return self.cache + 0


def update_cache_with_indices_calls():
    perm = torch.stack([torch.randperm(8, generator=GEN) for _ in range(2)])
    return [
        (randn(2, 8, 3, 4), perm, pos(0)),                                       # every row once
        (randn(2, 3, 3, 4), torch.tensor([[6, 1, 6], [0, 7, 3]]), pos(5)),       # a repeated index: the last wins
        (randn(2, 1, 3, 4), torch.tensor([[2], [5]]), pos(0)),
        (randn(2, 4, 3, 4), torch.tensor([[7, 6, 5, 4], [1, 1, 1, 2]]), pos(9)),  # start_pos is ignored
    ]


# ---- attention ----------------------------------------------------------------------------------------------------

H, HKV, D, L = 4, 2, 8, 16  # grouped-query attention: 4 query heads share 2 KV heads


class UpdateThenSdpa(torch.nn.Module):
    """The llama attention of upstream's custom-op export: update_cache into the caches, then causal custom_sdpa."""

    def __init__(self):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, L, HKV, D))
        self.register_buffer("v_cache", torch.zeros(1, L, HKV, D))

    def forward(self, q, k, v, input_pos):
        sp = start_pos(input_pos, q.size(1), L)
        torch.ops.llama.update_cache(k, self.k_cache, sp)
        torch.ops.llama.update_cache(v, self.v_cache, sp)
        return torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, sp, None, 0, True)


class SdpaWithKvCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, L, HKV, D))
        self.register_buffer("v_cache", torch.zeros(1, L, HKV, D))

    def forward(self, q, k, v, input_pos):
        sp = start_pos(input_pos, q.size(1), L)
        return torch.ops.llama.sdpa_with_kv_cache(q, k, v, self.k_cache, self.v_cache, sp, q.size(1), None, 0, True)


def decode_calls(steps=((0, 5), (5, 1), (6, 1), (7, 1), (8, 3), (11, 1), (12, 4))):
    """Prefill 5 tokens, three decode steps, a 3-token chunk, one more step, a last 4-token chunk filling the cache."""
    return [(randn(1, s, H, D), randn(1, s, HKV, D), randn(1, s, HKV, D), pos(p)) for p, s in steps]


class SdpaOverInputs(torch.nn.Module):
    """custom_sdpa over caches given as inputs: non-causal with an explicit scale, keys [0, start_pos + S)."""

    def forward(self, q, k_cache, v_cache, input_pos):
        sp = start_pos(input_pos, q.size(1), L)
        return torch.ops.llama.custom_sdpa(q, k_cache, v_cache, sp, None, 0, False, 0.3)


def sdpa_over_inputs_calls():
    return [(randn(1, s, H, D), randn(1, L, HKV, D), randn(1, L, HKV, D), pos(p)) for p, s in [(0, 4), (6, 1), (9, 7)]]


class SdpaMasked(torch.nn.Module):
    """custom_sdpa with a float additive mask over the whole cache (is_causal False; start_pos unused)."""

    def forward(self, q, k_cache, v_cache, mask):
        return torch.ops.llama.custom_sdpa(q, k_cache, v_cache, 0, mask, 0, False)


def sdpa_masked_calls():
    calls = []
    for s, p in [(3, 0), (1, 7), (5, 9)]:
        # A sliding-window causal mask placed at position p: 0 where allowed, -inf elsewhere.
        rows = torch.arange(s)[:, None] + p
        cols = torch.arange(L)[None, :]
        allowed = (cols <= rows) & (cols > rows - 6)
        mask = torch.where(allowed, randn(s, L, scale=0.1), torch.tensor(float("-inf")))
        calls.append((randn(1, s, H, D), randn(1, L, HKV, D), randn(1, L, HKV, D), mask))
    return calls


QD = 16  # head dim of the quantized programs


def quantize_rows(x):
    """Per-(position, head) asymmetric int8 quantization: (int8 values, float scales [.., 1], int8 zero points)."""
    lo = x.amin(-1, keepdim=True).clamp(max=0)
    hi = x.amax(-1, keepdim=True).clamp(min=0)
    scale = ((hi - lo) / 255).clamp(min=1e-6)
    zp = (-128 - torch.round(lo / scale)).clamp(-128, 127)
    q = torch.clamp(torch.round(x / scale) + zp, -128, 127)
    return q.to(torch.int8), scale.float(), zp.to(torch.int8)


class QuantizedCacheSdpa(torch.nn.Module):
    """upstream's quantized KV cache: int8 caches plus per-row scales / zero points, all written with update_cache,
    then custom_quantized_sdpa (causal, start_pos from input_pos)."""

    def __init__(self):
        super().__init__()
        for n in ("k", "v"):
            self.register_buffer(f"{n}_cache", torch.zeros(1, L, HKV, QD, dtype=torch.int8))
            self.register_buffer(f"{n}_scales", torch.zeros(1, L, HKV, 1))
            self.register_buffer(f"{n}_zps", torch.zeros(1, L, HKV, 1, dtype=torch.int8))

    def forward(self, q, q_scales, q_zps, k, k_scales, k_zps, v, v_scales, v_zps, input_pos):
        sp = start_pos(input_pos, q.size(1), L)
        for val, buf in ((k, self.k_cache), (k_scales, self.k_scales), (k_zps, self.k_zps), (v, self.v_cache),
                         (v_scales, self.v_scales), (v_zps, self.v_zps)):
            torch.ops.llama.update_cache(val, buf, sp)
        return torch.ops.llama.custom_quantized_sdpa(q, self.k_cache, self.v_cache, sp, None, 0, True, None, q_zps,
                                                     q_scales, self.k_zps, self.k_scales, self.v_zps, self.v_scales)


def quantized_calls():
    calls = []
    for p, s in [(0, 6), (6, 1), (7, 1), (8, 5)]:
        q = quantize_rows(randn(1, s, H, QD))
        k = quantize_rows(randn(1, s, HKV, QD))
        v = quantize_rows(randn(1, s, HKV, QD))
        calls.append((*q, *k, *v, pos(p)))
    return calls


class QuantizedSeqDim2(torch.nn.Module):
    """custom_quantized_sdpa with is_seq_at_dim_2: every operand [B, H, S, D], caches as inputs."""

    def forward(self, q, q_scales, q_zps, k, k_scales, k_zps, v, v_scales, v_zps, input_pos):
        sp = start_pos(input_pos, q.size(2), L)
        return torch.ops.llama.custom_quantized_sdpa(q, k, v, sp, None, 0, True, None, q_zps, q_scales, k_zps,
                                                     k_scales, v_zps, v_scales, True)


def quantized_seq2_calls():
    calls = []
    for p, s in [(0, 5), (9, 1), (3, 7)]:
        calls.append((*quantize_rows(randn(1, H, s, QD)), *quantize_rows(randn(1, HKV, L, QD)),
                      *quantize_rows(randn(1, HKV, L, QD)), pos(p)))
    return calls


# ---- Hadamard, fallback --------------------------------------------------------------------------------------------

class Hadamard(torch.nn.Module):
    def forward(self, a, b, c):
        f = torch.ops.llama.fast_hadamard_transform
        return f(a), f(b), f(c)


def hadamard_calls():
    # 2^6, 28 * 2^2 and 28 (the order-28 matrix alone), over batches of rows.
    return [(randn(3, 64), randn(2, 112), randn(2, 2, 28)) for _ in range(2)]


class Fallback(torch.nn.Module):
    def forward(self, x):
        return torch.ops.llama.fallback(x * 2) + 1


# ---- gated delta rule ----------------------------------------------------------------------------------------------

GB, GHQ, GH, GK, GV = 1, 4, 2, 8, 6


class GatedDelta(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, q, k, v, decay, beta, state):
        return self.op(q, k, v, decay, beta, state)


def gated_delta_calls(channelwise):
    """Prefill (chunked in upstream's kernel: T > 1, with a ragged last chunk), decode steps, another chunk; each call
    starts from the previous call's final state (filled in as the calls run)."""
    calls = []
    for t in (37, 1, 1, 5):
        q = randn(GB, GHQ, t, GK, scale=0.5)
        k = torch.nn.functional.normalize(randn(GB, GH, t, GK), dim=-1)
        v = randn(GB, GH, t, GV)
        dshape = (GB, GH, t, GK) if channelwise else (GB, GH, t)
        decay = torch.rand(*dshape, generator=GEN) * 0.5 + 0.5
        beta = torch.sigmoid(randn(GB, GH, t))
        calls.append([q, k, v, decay, beta, None])
    calls[0][5] = randn(GB, GH, GK, GV)
    return calls


# ---- quantized MoE -------------------------------------------------------------------------------------------------

def symmetric_group_quantize(w, group_size, nbit):
    n, k = w.shape
    qmin, qmax = -(1 << (nbit - 1)), (1 << (nbit - 1)) - 1
    g = w.reshape(n, k // group_size, group_size)
    scale = (g.abs().amax(-1) / ((qmax - qmin) / 2)).clamp(min=torch.finfo(torch.float32).eps)
    q = torch.clamp(torch.round(g / scale[..., None]), qmin, qmax).to(torch.int8)
    return q.reshape(n, k), scale


def pack_universal(w, group_size, nbit):
    """torchao's "universal" linear_8bit_act_xbit_weight packing (nr 8, kr 16, sr 2), header included. torchao's
    own packer (torch.ops.torchao._pack_8bit_act_4bit_weight) is not in the PyPI build, so this is written from the
    layout its unpacker reads; the blobs give the expected results on upstream's kernel (checked below)."""
    q, scale = symmetric_group_quantize(w, group_size, nbit)
    n, k = q.shape
    out = bytearray(np.array([6712, 1, nbit, 0, 0, 8, 16, 2] + [0] * 8, np.int32).tobytes())
    npad = (n + 7) // 8 * 8
    qp = torch.zeros(npad, k, dtype=torch.int8)
    qp[:n] = q
    sp = torch.zeros(npad, k // group_size)
    sp[:n] = scale
    for n0 in range(0, npad, 8):
        for gi in range(k // group_size):
            sums = np.zeros(8, np.int32)
            for i0 in range(0, group_size, 16):
                blk = qp[n0:n0 + 8, gi * group_size + i0: gi * group_size + i0 + 16].numpy()
                sums += blk.astype(np.int32).sum(1)
                vals = np.concatenate([blk[:, :8].reshape(-1), blk[:, 8:].reshape(-1)])
                if nbit == 8:
                    out += vals.astype(np.int8).tobytes()
                else:
                    u = (vals.astype(np.int16) + 8).astype(np.uint8)
                    for c in range(0, 128, 32):
                        out += ((u[c + 16:c + 32] << 4) | u[c:c + 16]).astype(np.uint8).tobytes()
            out += sp[n0:n0 + 8, gi].numpy().astype(np.float32).tobytes()
            out += sums.tobytes()
    deq = (q.reshape(n, k // group_size, group_size).float() * scale[..., None]).reshape(n, k)
    return torch.frombuffer(bytes(out), dtype=torch.uint8).clone(), deq


class MoE(torch.nn.Module):
    E, DIM, HID, GS = 4, 32, 48, 16

    def __init__(self, nbit, score_func, use_bias, top_k):
        super().__init__()
        self.nbit, self.score_func, self.top_k = nbit, score_func, top_k
        self.register_buffer("gate_weight", randn(self.E, self.DIM, scale=0.4))
        self.register_buffer("expert_bias", randn(self.E, scale=0.3) if use_bias else torch.empty(0))
        p13, p2, self.w13, self.w2 = [], [], [], []
        for _ in range(self.E):
            b, dq = pack_universal(randn(2 * self.HID, self.DIM, scale=0.3), self.GS, nbit)  # [w1; w3], K = dim
            p13.append(b)
            self.w13.append(dq)
            b, dq = pack_universal(randn(self.DIM, self.HID, scale=0.3), self.GS, nbit)      # w2 as [dim, hidden]
            p2.append(b)
            self.w2.append(dq)
        self.register_buffer("packed_w13", torch.stack(p13))
        self.register_buffer("packed_w2", torch.stack(p2))

    def forward(self, x):
        return torch.ops.llama.quantized_moe_ffn(x, self.gate_weight, self.expert_bias, self.packed_w13,
                                                 self.packed_w2, self.top_k, self.E, self.HID, self.DIM, self.GS,
                                                 self.nbit, self.score_func, 2.5 if self.score_func == "sigmoid" else 1.0)

    def reference(self, x):
        """The op's contract on the dequantized weights (an independent check of the packing)."""
        s = x @ self.gate_weight.T
        if self.score_func == "sigmoid":
            p = torch.sigmoid(s)
            sel = p + self.expert_bias if self.expert_bias.numel() else p
            idx = torch.topk(sel, self.top_k, dim=-1).indices
            w = torch.gather(p, -1, idx)
            w = w * 2.5 / w.sum(-1, keepdim=True)
        else:
            idx = torch.topk(s, self.top_k, dim=-1).indices
            w = torch.gather(s, -1, idx).softmax(-1)
        out = torch.zeros_like(x)
        for t in range(x.size(0)):
            for j in range(self.top_k):
                e = int(idx[t, j])
                h = self.w13[e] @ x[t]
                mid = torch.nn.functional.silu(h[:self.HID]) * h[self.HID:]
                out[t] += w[t, j] * (self.w2[e] @ mid)
        return out


# ---- driver --------------------------------------------------------------------------------------------------------

def seq_dims(n_inputs, dims, seq=None):
    seq = seq or Dim("seq", min=1, max=16)
    return tuple({d: seq} if d is not None else None for d in (dims + [None] * n_inputs)[:n_inputs])


def export(module, example, dynamic_shapes):
    module.eval()
    ep = torch.export.export(module, example, dynamic_shapes=dynamic_shapes, strict=False)
    return to_edge_transform_and_lower(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_executorch()


def upstream_run(pte, calls, chain_state=False):
    """Runs the calls in order on upstream's runtime; with chain_state, input 5 of every later call is the previous
    call's output 1 (the gated delta rule's state)."""
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    m = _load_for_executorch(str(pte))
    arrays = {}
    prev = None
    for k, inputs in enumerate(calls):
        inputs = list(inputs)
        if chain_state and inputs[5] is None:
            inputs[5] = prev[1].clone()
        outs = m.forward(tuple(inputs))
        prev = outs
        arrays.update({f"case{k}_in{i}": t.numpy().copy() for i, t in enumerate(inputs)})
        arrays.update({f"case{k}_out{j}": t.numpy().copy() for j, t in enumerate(outs)})
    return arrays


def fixtures():
    seq = Dim("seq", min=1, max=16)
    s8 = Dim("s8", min=1, max=8)
    yield "update_cache", UpdateCache(), update_cache_calls(), ({1: s8}, {1: s8}, None), False
    yield ("update_cache_with_indices", UpdateCacheWithIndices(), update_cache_with_indices_calls(),
           ({1: s8}, {1: s8}, None), False)
    yield "custom_sdpa_gqa", UpdateThenSdpa(), decode_calls(), ({1: seq}, {1: seq}, {1: seq}, None), False
    yield "sdpa_with_kv_cache", SdpaWithKvCache(), decode_calls(), ({1: seq}, {1: seq}, {1: seq}, None), False
    yield "custom_sdpa_scaled", SdpaOverInputs(), sdpa_over_inputs_calls(), ({1: seq}, None, None, None), False
    yield "custom_sdpa_masked", SdpaMasked(), sdpa_masked_calls(), ({1: seq}, None, None, {0: seq}), False
    yield ("custom_quantized_sdpa", QuantizedCacheSdpa(), quantized_calls(),
           tuple([{1: seq}] * 9 + [None]), False)
    yield ("custom_quantized_sdpa_seq2", QuantizedSeqDim2(), quantized_seq2_calls(),
           tuple([{2: seq}] * 3 + [None] * 7), False)
    yield "fast_hadamard_transform", Hadamard(), hadamard_calls(), None, False
    yield "fallback", Fallback(), [(randn(2, 5),), (randn(2, 5),)], None, False
    t = Dim("t", min=1, max=64)
    gd_dims = ({2: t}, {2: t}, {2: t}, {2: t}, {2: t}, None)
    yield ("gated_delta_rule", GatedDelta(torch.ops.llama.gated_delta_rule), gated_delta_calls(False), gd_dims,
           True)
    yield ("channelwise_gated_delta_rule", GatedDelta(torch.ops.llama.channelwise_gated_delta_rule),
           gated_delta_calls(True), gd_dims, True)
    tok = Dim("tokens", min=1, max=16)
    for name, args in [("quantized_moe_ffn_4bit_sigmoid", (4, "sigmoid", True, 2)),
                       ("quantized_moe_ffn_8bit_softmax", (8, "softmax", False, 3))]:
        yield name, MoE(*args), [(randn(n, MoE.DIM),) for n in (5, 1, 1, 9)], ({0: tok},), False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for name, module, calls, dyn, chain in fixtures():
        if args.only and name not in args.only:
            continue
        example = list(calls[0])
        if chain and example[5] is None:
            example[5] = torch.zeros(GB, GH, GK, GV)
        prog = export(module, tuple(example), dyn)
        pte = OUT / f"{name}.pte"
        pte.write_bytes(prog.buffer)
        arrays = upstream_run(pte, calls, chain)
        if isinstance(module, MoE):  # the hand-written packing must mean what upstream's kernel reads
            for k in range(len(calls)):
                ref = module.reference(torch.from_numpy(arrays[f"case{k}_in0"]))
                np.testing.assert_allclose(arrays[f"case{k}_out0"], ref.numpy(), rtol=1e-4, atol=1e-4)
        np.savez_compressed(OUT / f"{name}.npz", **arrays)
        print(f"{name}: {pte.stat().st_size} + {(OUT / f'{name}.npz').stat().st_size} bytes, {len(calls)} calls",
              flush=True)


if __name__ == "__main__":
    main()
