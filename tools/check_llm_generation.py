"""Greedy generation with this runtime on an LLM program exported by upstream's export_llm, compared with upstream's
own generation on the same file (tools/export/export_llm_fixtures.py writes both: NAME.pte and NAME.npz with
prompt, tokens and logits).

    .venv/bin/python tools/check_llm_generation.py tests/fixtures/llm/llama_portable_sdpa.pte [--atol 1e-3]

The prompt is prefilled in one call (tokens int64 [1, P], input_pos int64 [0]), then one token per call. Exits 0 when
every generated token matches upstream's and every row of logits is within atol; prints the largest difference.
"""
import argparse
import pathlib
import sys

import numpy as np


def generate(pte, prompt, steps):
    from executorch.extension.pybindings import portable_lib

    m = portable_lib._load_for_executorch(str(pte))
    out = m.forward([np.array([prompt], np.int64), np.array([0], np.int64)])[0]
    tokens, rows, pos = [], [], len(prompt)
    for _ in range(steps):
        logits = np.asarray(out.detach().numpy() if hasattr(out, "detach") else out, np.float32)
        row = logits.reshape(-1, logits.shape[-1])[-1]
        rows.append(row.copy())
        tokens.append(int(row.argmax()))
        if len(tokens) == steps:
            break
        out = m.forward([np.array([[tokens[-1]]], np.int64), np.array([pos], np.int64)])[0]
        pos += 1
    return np.array(tokens, np.int64), np.stack(rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pte", type=pathlib.Path)
    p.add_argument("--atol", type=float, default=1e-3)
    a = p.parse_args()
    ref = np.load(a.pte.with_suffix(".npz"))
    tokens, logits = generate(a.pte, ref["prompt"].tolist(), len(ref["tokens"]))
    diff = float(np.abs(logits - ref["logits"]).max())
    same = np.array_equal(tokens, ref["tokens"])
    print(f"{a.pte.name}: tokens {'match' if same else 'DIFFER'} ({tokens.tolist()} vs {ref['tokens'].tolist()}); "
          f"max |logits - upstream| = {diff:.3g}")
    return 0 if same and diff <= a.atol else 1


if __name__ == "__main__":
    sys.exit(main())
