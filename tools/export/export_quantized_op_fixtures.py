"""Fixtures for the quantized-LLM, preprocessing, FFT and loop operators, made with the real exporter and checked
with UPSTREAM's runtime (.venv-export: torch 2.13.0, executorch 1.5.1).

    .venv-export/bin/python tools/export/export_quantized_op_fixtures.py   # writes tests/fixtures/quantized_ops/

Each program is a small torch module that calls the operator (quantized_decomposed::* through torch.ops, with its
packed weights as buffers; preprocess::tile_crop from upstream's custom-op library; torch.fft.rfft* / irfft*;
torch.map for executorch_prim::et_copy_index), exported with torch.export + to_edge_transform_and_lower(...)
.to_executorch(). The script checks that the .pte really calls the target operators, runs every case on upstream's
runtime (with its quantized and custom-op kernels registered) and stores, in NAME.npz, the inputs case{k}_in{i} and
UPSTREAM's outputs case{k}_out{j}. It also prints how far upstream is from torch eager on each case (eager is not
the reference: dynamic quantization rounds differently there). meta_* arrays carry what bad-input tests need (the
bytes of a scale buffer, to corrupt it in a copy of the program).

mixed_linear, mixed_mm and add are declared by executorch without an eager kernel or a fake; this script registers
both (the fake only gives the output shape; the eager kernel is the plain formula, used for the printed comparison).
"""
import pathlib
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.export import Dim  # noqa: E402
from torch.library import impl, register_fake  # noqa: E402

import executorch.exir.passes._quant_patterns_and_replacements  # noqa: E402, F401  (defines the embedding ops)
import executorch.extension.llm.custom_ops.op_tile_crop_aot  # noqa: E402, F401  (preprocess::tile_crop + runtime kernel)
import executorch.kernels.quantized  # noqa: E402, F401  (upstream's quantized_decomposed::*.out runtime kernels)
from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.extension.pybindings.portable_lib import _load_for_executorch  # noqa: E402
from functorch.experimental import control_flow  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "quantized_ops"
qd = torch.ops.quantized_decomposed


@register_fake("quantized_decomposed::mixed_linear")
def _mixed_linear_fake(x, w, s, zp, dtype=None):
    return x.new_empty((x.shape[0], w.shape[0]), dtype=dtype or x.dtype)


@impl("quantized_decomposed::mixed_linear", "CompositeExplicitAutograd")
def _mixed_linear_eager(x, w, s, zp, dtype=None):
    g = w.shape[1] // (s.shape[1] if s.dim() == 2 else 1)
    scales = (s if s.dim() == 2 else s[:, None]).repeat_interleave(g, dim=1)
    return (x @ (w.to(x.dtype) * scales).t()).to(dtype or x.dtype)


@register_fake("quantized_decomposed::mixed_mm")
def _mixed_mm_fake(x, w, s, zp):
    return x.new_empty((x.shape[0], w.shape[1]))


@impl("quantized_decomposed::mixed_mm", "CompositeExplicitAutograd")
def _mixed_mm_eager(x, w, s, zp):
    return x @ (w.to(x.dtype) * s[:, None])


@register_fake("quantized_decomposed::add")
def _add_fake(a, *args):
    return torch.empty_like(a)


@impl("quantized_decomposed::add", "CompositeExplicitAutograd")
def _add_eager(a, sa, za, qa0, qa1, b, sb, zb, qb0, qb1, so, zo, qo0, qo1):
    x = (a.to(torch.float32) - za) * sa + (b.to(torch.float32) - zb) * sb
    return torch.clamp(torch.round(x / so) + zo, qo0, qo1).to(a.dtype)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def pack(values, bits):
    """Signed values in [-2^(bits-1), 2^(bits-1)) packed as upstream's exporter packs them."""
    return torch.ops.quant_fusion._pack_embedding_weight(values.to(torch.int8), bits)


class Embedding(torch.nn.Module):
    """One quantized_decomposed::embedding_{byte,4bit,2bit} call on constant (buffer) weights and scales."""

    def __init__(self, bits, rows, dim, groups, zero_points, scale_dtype, out_dtype, variant, weight_dtype, seed):
        super().__init__()
        g = gen(seed)
        lo, hi = {8: (-128, 128), 4: (-8, 8), 2: (-2, 2)}[bits]
        q = torch.randint(lo, hi, (rows, dim), generator=g)
        if bits == 8:
            w = (q + 128).to(torch.uint8) if weight_dtype == torch.uint8 else q.to(torch.int8)
            self.qmin, self.qmax = (0, 255) if weight_dtype == torch.uint8 else (-128, 127)
        else:
            w = pack(q, bits)
            self.qmin, self.qmax = lo, hi - 1
        shape = (rows, groups) if groups > 1 else (rows,)
        self.register_buffer("w", w)
        # Distinct scales (the bad-input test finds these bytes in the program to corrupt one).
        self.register_buffer("s", (torch.rand(shape, generator=g) * 0.05 + 0.01).to(scale_dtype))
        zp = torch.randint(-3, 4, shape, generator=g).to(scale_dtype) if zero_points else None
        self.register_buffer("zp", zp)
        self.bits, self.out_dtype, self.variant = bits, out_dtype, variant

    def forward(self, idx):
        op = {8: qd.embedding_byte, 4: qd.embedding_4bit, 2: qd.embedding_2bit}[self.bits]
        if self.variant == "out":
            return op.default(self.w, self.s, self.zp, self.qmin, self.qmax, idx)
        return op.dtype(self.w, self.s, self.zp, self.qmin, self.qmax, idx, dtype=self.out_dtype)


class PerToken(torch.nn.Module):
    """Dynamic per-token quantization as quantized LLM activations get it: choose, quantize, dequantize."""

    def forward(self, x):
        scale, zp = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
        q = qd.quantize_per_token(x, scale, zp, -128, 127, torch.int8)
        return scale, zp, q, qd.dequantize_per_token(q, scale, zp, -128, 127, torch.int8, torch.float32)


class ChooseQParams(torch.nn.Module):
    def forward(self, x):
        s8, z8 = qd.choose_qparams.tensor(x, 0, 255, 1e-7, torch.uint8)
        s7, z7 = qd.choose_qparams.tensor(x, -128, 127, torch.finfo(torch.float32).eps, torch.int8)
        return s8, z8, s7, z7


class QuantizedAdd(torch.nn.Module):
    def forward(self, a, b):
        return qd.add(a, 0.05, 10, 0, 255, b, 0.02, 130, 0, 255, 0.07, 50, 0, 255)


class MixedLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = gen(7)
        self.register_buffer("w", torch.randint(-128, 128, (6, 16), generator=g).to(torch.int8))
        self.register_buffer("sg", torch.rand(6, 4, generator=g) * 0.01 + 0.001)   # 4 groups of 4
        self.register_buffer("sr", torch.rand(6, generator=g) * 0.01 + 0.001)      # one scale per row

    def forward(self, x):
        return qd.mixed_linear(x, self.w, self.sg, None, torch.float32), qd.mixed_linear(x, self.w, self.sr, None)


class MixedMM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = gen(8)
        self.register_buffer("w", torch.randint(-128, 128, (8, 5), generator=g).to(torch.int8))
        self.register_buffer("s", torch.rand(8, generator=g) * 0.01 + 0.001)

    def forward(self, x):
        return qd.mixed_mm(x, self.w, self.s, None)


class TileCrop(torch.nn.Module):
    def __init__(self, tile):
        super().__init__()
        self.tile = tile

    def forward(self, x):
        return torch.ops.preprocess.tile_crop.default(x, self.tile)


class Fft1d(torch.nn.Module):
    """rfft / irfft along the last dim of a non-power-of-two length, default (backward) normalization."""

    def forward(self, x):
        y = torch.fft.rfft(x)
        return torch.view_as_real(y), torch.fft.irfft(y, n=x.shape[-1])


class Fft2d(torch.nn.Module):
    """rfft2 / irfft2 over the last two dims with "ortho". (rfftn over dims (0, 2) exports an output whose dim order
    differs from the input's, which upstream's kernel refuses, so it is not among the fixtures.)"""

    def forward(self, x):
        y = torch.fft.rfft2(x, norm="ortho")
        return torch.view_as_real(y), torch.fft.irfft2(y, s=x.shape[-2:], norm="ortho")


class Fft64(torch.nn.Module):
    """float64, odd output length for irfft (the Nyquist-free case)."""

    def forward(self, x):
        y = torch.fft.rfft(x, norm="forward")
        return torch.view_as_real(y), torch.fft.irfft(y, n=7, norm="forward")


class MapLoop(torch.nn.Module):
    """torch.map: the emitter writes a loop whose body ends with executorch_prim::et_copy_index."""

    def forward(self, xs, y):
        return control_flow.map(lambda x, y: x * 2 + y.sin(), xs, y)


def ops_of(prog):
    return {f"{o.name}.{o.overload}" for plan in prog.executorch_program.execution_plan for o in plan.operators}


def export(name, module, cases, want_ops, dynamic_shapes=None, meta=None):
    module.eval()
    ep = torch.export.export(module, cases[0], dynamic_shapes=dynamic_shapes)
    prog = to_edge_transform_and_lower(ep).to_executorch()
    missing = set(want_ops) - ops_of(prog)
    assert not missing, f"{name}: the program lacks {missing} (it calls {sorted(ops_of(prog))})"
    pte = OUT / f"{name}.pte"
    pte.write_bytes(prog.buffer)
    runtime = _load_for_executorch(str(pte))
    arrays = dict(meta or {})
    for k, inputs in enumerate(cases):
        got = runtime.forward(list(inputs))
        with torch.no_grad():
            eager = module(*inputs)
        eager = eager if isinstance(eager, tuple) else (eager,)
        assert len(got) == len(eager), name
        diffs = []
        for j, (g, e) in enumerate(zip(got, eager)):
            assert g.dtype == e.dtype and g.shape == e.shape, (name, k, j, g.dtype, e.dtype, g.shape, e.shape)
            diffs.append(f"{(g.double() - e.double()).abs().max().item() if g.numel() else 0.0:.3g}")
            arrays[f"case{k}_out{j}"] = g.numpy()
        arrays.update({f"case{k}_in{i}": t.numpy() for i, t in enumerate(inputs)})
        print(f"  {name} case {k}: max |upstream - eager| per output = {', '.join(diffs)}")
    np.savez(OUT / f"{name}.npz", **arrays)
    print(f"{name}: {pte.stat().st_size} bytes, {len(cases)} cases, ops {sorted(ops_of(prog))}")


def scale_meta(module):
    return {"meta_scales": module.s.detach().numpy().copy()}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    idx = [torch.tensor([[0, 5, 15], [7, 7, 2]]), torch.tensor([[15, 14, 1], [0, 3, 9]]), torch.tensor([[8, 8, 8], [1, 2, 3]])]
    idx32 = [i.to(torch.int32) for i in idx]
    E = "quantized_decomposed::"
    cases = [
        ("embedding_byte", Embedding(8, 16, 8, 1, False, torch.float32, None, "out", torch.int8, 1), idx,
         [E + "embedding_byte.out"]),
        ("embedding_byte_group", Embedding(8, 16, 8, 2, True, torch.float32, torch.float32, "dtype", torch.uint8, 2),
         idx, [E + "embedding_byte.dtype_out"]),
        ("embedding_byte_fp16", Embedding(8, 16, 8, 1, False, torch.float32, torch.float16, "dtype", torch.int8, 3),
         idx, [E + "embedding_byte.dtype_out"]),
        ("embedding_4bit", Embedding(4, 16, 8, 1, True, torch.float32, None, "out", None, 4), idx,
         [E + "embedding_4bit.out"]),
        ("embedding_4bit_group", Embedding(4, 16, 8, 4, True, torch.float16, torch.float16, "dtype", None, 5), idx32,
         [E + "embedding_4bit.dtype_out"]),
        ("embedding_2bit", Embedding(2, 16, 8, 1, True, torch.float32, None, "out", None, 6), idx,
         [E + "embedding_2bit.out"]),
        ("embedding_2bit_group", Embedding(2, 16, 8, 2, False, torch.float32, torch.float32, "dtype", None, 7), idx32,
         [E + "embedding_2bit.dtype_out"]),
    ]
    for name, module, inputs, ops in cases:
        export(name, module, [(i,) for i in inputs], ops, meta=scale_meta(module))

    g = gen(10)
    x = torch.randn(2, 3, 16, generator=g)
    pos = torch.rand(2, 3, 16, generator=g) + 0.5        # tokens without negatives
    mixed = x.clone()
    mixed[0, 1] = 0.0                                   # an all-zero token (scale falls back to 0.1)
    mixed[1, 2] = torch.linspace(0, 1e-3, 16)           # a tiny range (scale raised to 6.1e-5)
    export("per_token", PerToken(), [(x,), (pos,), (mixed * 3,)],
           [E + "choose_qparams_per_token_asymmetric.out", E + "quantize_per_token.out", E + "dequantize_per_token.out"])
    export("choose_qparams", ChooseQParams(),
           [(torch.randn(4, 8, generator=g),), (torch.rand(4, 8, generator=g) + 1,), (-torch.rand(4, 8, generator=g),),
            (torch.zeros(4, 8),), (torch.linspace(-1e-4, 2e-4, 32).reshape(4, 8),)],
           [E + "choose_qparams.Tensor_out"])
    u8 = lambda: torch.randint(0, 256, (4, 8), generator=g, dtype=torch.uint8)  # noqa: E731
    export("quantized_add", QuantizedAdd(), [(u8(), u8()) for _ in range(3)], [E + "add.out"])
    export("mixed_linear", MixedLinear(), [(torch.randn(3, 16, generator=g),) for _ in range(2)],
           [E + "mixed_linear.out"])
    export("mixed_mm", MixedMM(), [(torch.randn(3, 8, generator=g),) for _ in range(2)], [E + "mixed_mm.out"])

    export("tile_crop", TileCrop(4), [(torch.randn(3, 8, 8, generator=g),) for _ in range(2)],
           ["preprocess::tile_crop.out"])
    # Fewer tiles than the fake's bound of 4: the dynamic output is resized down. (Only float32: upstream's fake
    # always returns float32, so an integer image exports a program its own runtime refuses.)
    export("tile_crop_2tiles", TileCrop(4), [(torch.randn(3, 4, 8, generator=g),) for _ in range(2)],
           ["preprocess::tile_crop.out"])

    export("fft_1d", Fft1d(), [(torch.randn(3, 10, generator=g),) for _ in range(2)],
           ["aten::_fft_r2c.out", "aten::_fft_c2r.out"])
    export("fft_2d", Fft2d(), [(torch.randn(4, 6, 9, generator=g),) for _ in range(2)],
           ["aten::_fft_r2c.out", "aten::_fft_c2r.out"])
    export("fft_f64", Fft64(), [(torch.randn(2, 7, generator=g, dtype=torch.float64),) for _ in range(2)],
           ["aten::_fft_r2c.out", "aten::_fft_c2r.out"])

    n = Dim("n", min=1, max=4)
    export("map_loop", MapLoop(), [(torch.randn(k, 3, generator=g), torch.randn(3, generator=g)) for k in (4, 2, 3, 1)],
           ["executorch_prim::et_copy_index.tensor"], dynamic_shapes=({0: n}, None))
    print("wrote", sorted(p.name for p in OUT.iterdir()))


if __name__ == "__main__":
    main()
