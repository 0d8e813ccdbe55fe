#!/usr/bin/env python3
"""Greedy generation with an LLM exported by `python -m executorch.extension.llm.export.export_llm` (KV cache on).
Needs only NumPy: torch is not used, and not needed.

    python examples/generate.py MODEL.pte --prompt 1,17,99,250 [--tokens 32]
    python examples/generate.py MODEL.pte --prompt "Once upon a time" --tokenizer tokenizer.json [--tokens 32]

The prompt is prefilled in one call (tokens [1, P], input_pos [0]); then one token per call. Prints the generated
ids (and their text when a tokenizer is given) and the prefill and decode speed in tokens/s. A tokenizer file is a
Hugging Face `tokenizer.json` (read with the `tokenizers` package, which the user installs).
"""
import argparse
import pathlib
import sys
import time

import numpy as np

from executorch.extension.pybindings import portable_lib


def load_tokenizer(path):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        sys.exit("--tokenizer needs the `tokenizers` package (pip install tokenizers); or pass --prompt as token ids")
    return Tokenizer.from_file(str(path))


def last_logits(outputs):
    logits = np.asarray(outputs[0], dtype=np.float32)
    return logits.reshape(-1, logits.shape[-1])[-1]


class Generator:
    """Runs an export_llm program: forward(tokens int64 [1, n], input_pos int64 [1]) -> logits."""

    def __init__(self, path):
        self.module = portable_lib._load_for_executorch(str(path))
        meta = self.module.method_meta("forward")
        if meta.num_inputs() != 2:
            raise SystemExit(f"{path}: forward takes {meta.num_inputs()} inputs; an export_llm program with "
                             "model.use_kv_cache=True takes (tokens, input_pos)")
        self.max_prompt = meta.input_tensor_meta(0).sizes()[-1]  # the exported upper bound of the token dim

    def prefill(self, prompt):
        if len(prompt) > self.max_prompt:
            raise SystemExit(f"the prompt has {len(prompt)} tokens; this program takes at most {self.max_prompt} per call")
        tokens = np.asarray(prompt, dtype=np.int64).reshape(1, -1)
        return last_logits(self.module.forward([tokens, np.zeros(1, np.int64)]))

    def step(self, token, pos):
        return last_logits(self.module.forward([np.array([[token]], np.int64), np.array([pos], np.int64)]))

    def generate(self, prompt, count, stop=None):
        """Greedy ids after the prompt, with the seconds spent in prefill and in decode."""
        t0 = time.perf_counter()
        logits = self.prefill(prompt)
        t1 = time.perf_counter()
        ids = [int(np.argmax(logits))]
        pos = len(prompt)
        while len(ids) < count and (stop is None or ids[-1] != stop):
            ids.append(int(np.argmax(self.step(ids[-1], pos))))
            pos += 1
        return ids, t1 - t0, time.perf_counter() - t1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("--prompt", required=True, help="comma-separated token ids, or text with --tokenizer")
    ap.add_argument("--tokenizer", type=pathlib.Path)
    ap.add_argument("--tokens", type=int, default=32, help="how many tokens to generate (prefill's included)")
    ap.add_argument("--stop", type=int, default=None, help="a token id that ends generation")
    args = ap.parse_args()

    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    if tokenizer:
        prompt = tokenizer.encode(args.prompt).ids
    else:
        try:
            prompt = [int(t) for t in args.prompt.split(",") if t.strip()]
        except ValueError:
            sys.exit("--prompt must be comma-separated token ids unless --tokenizer is given")
    if not prompt:
        sys.exit("the prompt is empty")
    gen = Generator(args.model)
    ids, prefill_s, decode_s = gen.generate(prompt, args.tokens, args.stop)
    print("prompt ids:", ",".join(map(str, prompt)))
    print("generated ids:", ",".join(map(str, ids)))
    if tokenizer:
        print("text:", tokenizer.decode(ids))
    print(f"prefill: {len(prompt)} tokens in {prefill_s * 1e3:.2f} ms = {len(prompt) / prefill_s:.1f} tokens/s")
    if len(ids) > 1:
        print(f"decode: {len(ids) - 1} tokens in {decode_s * 1e3:.2f} ms = {(len(ids) - 1) / decode_s:.1f} tokens/s")


if __name__ == "__main__":
    main()
