"""stories15M-sized LLM programs for bench/run.py llm, made with the wheel's own flow (`export_llm`) on a random
checkpoint: llama3 with dim 288, 6 layers, 6 heads, vocab 32000, max_seq_length 128 (the size of the public
stories15M model; random weights, so no download). Too large to commit: they go to bench/llm/ (ignored by git).

    .venv-export/bin/python tools/export/export_bench_llm.py [--only NAME ...]

Writes bench/llm/NAME.pte for each variant and bench/llm/manifest.json (the prompt the bench prefills and the
export options); bench/run.py llm times them against upstream's runtime when the directory exists.
"""
import argparse
import json
import pathlib
import sys
import tempfile

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from export_llm_fixtures import export  # noqa: E402  (the same export_llm invocation as the fixtures)

OUT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "llm"
PARAMS = {"dim": 288, "n_layers": 6, "n_heads": 6, "n_kv_heads": 6, "vocab_size": 32000, "multiple_of": 32,
          "norm_eps": 1e-5, "rope_theta": 500000.0, "use_scaled_rope": True}
MAX_SEQ = 128
PROMPT = list(range(1, 33))  # a prompt of 32 tokens
COMMON = ["base.model_class=llama3", "model.use_kv_cache=True", f"export.max_seq_length={MAX_SEQ}",
          f"export.max_context_length={MAX_SEQ}", "model.use_sdpa_with_kv_cache=True", "backend.xnnpack.enabled=True"]
VARIANTS = {
    "stories_xnnpack": [],
    "stories_xnnpack_8da4w": ["quantization.qmode=8da4w", "quantization.group_size=32"],
    "stories_xnnpack_8da8w": ["quantization.pt2e_quantize=xnnpack_dynamic"],
}


def make_checkpoint(directory):
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    torch.manual_seed(0)
    model = construct_transformer(ModelArgs(max_seq_len=MAX_SEQ, max_context_len=MAX_SEQ, **PARAMS))
    ckpt = pathlib.Path(directory) / "checkpoint.pth"
    torch.save({k: v.detach().clone() for k, v in model.named_parameters()}, ckpt)
    params = pathlib.Path(directory) / "params.json"
    params.write_text(json.dumps(PARAMS))
    return ckpt, params


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.update({"params": PARAMS, "max_seq_length": MAX_SEQ, "prompt": PROMPT})
    variants = manifest.setdefault("variants", {})
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, params = make_checkpoint(tmp)
        for name, options in VARIANTS.items():
            if args.only and name not in args.only:
                continue
            pte = OUT / f"{name}.pte"
            pte.write_bytes(export(name, options, ckpt, params, tmp, common=COMMON))
            variants[name] = {"options": COMMON + options}
            print(name, pte.stat().st_size, "bytes", flush=True)
            manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
