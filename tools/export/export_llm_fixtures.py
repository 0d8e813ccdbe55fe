"""LLM fixtures made with the wheel's own flow, `python -m executorch.extension.llm.export.export_llm`, on a tiny
llama3 (dim 64, 2 layers, 4 heads, 2 KV heads, vocab 512, max_seq_length 64) with a random checkpoint this script
makes, and upstream's own greedy generation on each file as the expectation.

    .venv-export/bin/python tools/export/export_llm_fixtures.py [--only NAME ...]   # writes tests/fixtures/llm/

For each variant NAME: NAME.pte and NAME.npz with
  prompt      int64 [P]        the prompt, prefilled in one call (tokens [1, P], input_pos [0])
  tokens      int64 [G]        upstream's greedy tokens: the prefill's argmax, then one token per call
  logits      float32 [G, V]   upstream's logits of every call (row 0 = the prefill's last position)
and manifest.json with the export options of each.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import torch

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "llm"

PARAMS = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 512, "multiple_of": 32,
          "norm_eps": 1e-5, "rope_theta": 500000.0, "use_scaled_rope": True}
MAX_SEQ = 64
PROMPT = [1, 17, 99, 250, 3, 42, 7]
GENERATE = 12

COMMON = ["base.model_class=llama3", "model.use_kv_cache=True", f"export.max_seq_length={MAX_SEQ}",
          f"export.max_context_length={MAX_SEQ}"]
VARIANTS = {
    "llama_portable": [],
    "llama_portable_sdpa": ["model.use_sdpa_with_kv_cache=True"],
    "llama_xnnpack": ["model.use_sdpa_with_kv_cache=True", "backend.xnnpack.enabled=True"],
    "llama_xnnpack_8da4w": ["model.use_sdpa_with_kv_cache=True", "backend.xnnpack.enabled=True",
                            "quantization.qmode=8da4w", "quantization.group_size=32"],
    # 8-bit dynamic activations and weights through XNNPACK: export_llm 1.5.1 refuses qmode=torchao:8da8w with
    # XNNPACK ("low-bit Ao ops"); its XNNPACK 8da8w flow is PT2E dynamic quantization (per-channel int8 weights).
    "llama_xnnpack_8da8w": ["model.use_sdpa_with_kv_cache=True", "backend.xnnpack.enabled=True",
                            "quantization.pt2e_quantize=xnnpack_dynamic"],
    "llama_xnnpack_qc4": ["model.use_sdpa_with_kv_cache=True", "backend.xnnpack.enabled=True",
                          "quantization.pt2e_quantize=xnnpack_dynamic_qc4"],
    "llama_embedding_4bit": ["model.use_sdpa_with_kv_cache=True", "quantization.embedding_quantize='4,32'"],
}


def make_checkpoint(directory):
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    torch.manual_seed(0)
    model = construct_transformer(ModelArgs(max_seq_len=MAX_SEQ, max_context_len=MAX_SEQ, **PARAMS))
    # Default init gives a near-uniform output distribution; widen it so greedy decoding has clear winners.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                p.mul_(2.0)
    ckpt = pathlib.Path(directory) / "checkpoint.pth"
    torch.save({k: v.detach().clone() for k, v in model.named_parameters()}, ckpt)
    params = pathlib.Path(directory) / "params.json"
    params.write_text(json.dumps(PARAMS))
    return ckpt, params


def export(name, options, ckpt, params, directory, common=COMMON):
    args = [sys.executable, "-m", "executorch.extension.llm.export.export_llm", *common,
            f"base.checkpoint={ckpt}", f"base.params={params}", f"export.output_dir={directory}",
            f"export.output_name={name}.pte", *options]
    subprocess.run(args, check=True, cwd=directory, stdout=subprocess.DEVNULL)
    return (pathlib.Path(directory) / f"{name}.pte").read_bytes()


def upstream_generation(pte_path):
    """Greedy generation with upstream's runtime: the prompt in one call, then one token per call."""
    import executorch.kernels.quantized  # noqa: F401  (quantized_decomposed kernels)
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama:: kernels)
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    module = _load_for_executorch(str(pte_path))
    tokens, rows = [], []
    out = module.forward((torch.tensor([PROMPT], dtype=torch.long), torch.tensor([0], dtype=torch.long)))[0]
    pos = len(PROMPT)
    for _ in range(GENERATE):
        logits = out.reshape(-1, out.shape[-1])[-1].float()
        rows.append(logits.numpy().copy())
        tokens.append(int(logits.argmax()))
        if len(tokens) == GENERATE:
            break
        out = module.forward((torch.tensor([[tokens[-1]]], dtype=torch.long), torch.tensor([pos], dtype=torch.long)))[0]
        pos += 1
    return np.array(tokens, np.int64), np.stack(rows).astype(np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.update({"params": PARAMS, "max_seq_length": MAX_SEQ, "prompt": PROMPT, "generate": GENERATE,
                     "versions": {"torch": torch.__version__.split("+")[0],
                                  "executorch": __import__("importlib.metadata").metadata.version("executorch")}})
    variants = manifest.setdefault("variants", {})
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, params = make_checkpoint(tmp)
        for name, options in VARIANTS.items():
            if args.only and name not in args.only:
                continue
            pte = OUT / f"{name}.pte"
            pte.write_bytes(export(name, options, ckpt, params, tmp))
            tokens, logits = upstream_generation(pte)
            np.savez(OUT / f"{name}.npz", prompt=np.array(PROMPT, np.int64), tokens=tokens, logits=logits)
            variants[name] = {"options": COMMON + options, "tokens": tokens.tolist()}
            print(name, pte.stat().st_size, "bytes; tokens", tokens.tolist(), flush=True)
            manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")  # after each: a later failure keeps it


if __name__ == "__main__":
    main()
