#!/usr/bin/env python3
"""Validate the exported fixtures with the UPSTREAM ExecuTorch runtime (pip `executorch`).

    .venv-export/bin/python tools/export/reference_run.py [--dir tests/fixtures/exported]

For every fixture in manifest.json:
  pte     load NAME.pte with _load_for_executorch, run the main method on the npz
          inputs and compare with the npz outputs (manifest tolerance)
  bundled load NAME.bpte, run every bundled test case of every method in order
          (BundledModule.verify_result_with_bundled_expected_output)
  extra   fixture-specific checks (stateful: 2 calls with ones -> 2*ones)
Exit status is non-zero if any check fails.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import numpy as np  # noqa: E402
import torch  # noqa: E402
# Registers the quantized_decomposed::*.out kernels with the upstream runtime too
# (portable_lib alone lacks them: quantized_* fixtures fail with OperatorMissing 0x14).
import executorch.kernels.quantized  # noqa: E402, F401
from executorch.extension.pybindings.portable_lib import (  # noqa: E402
    _load_bundled_program_from_buffer,
    _load_for_executorch,
)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DIR = os.path.join(REPO_ROOT, "tests", "fixtures", "exported")


def _input_from_npz(arr: np.ndarray, key: str, bf16_keys, pinfo):
    if pinfo["kind"] != "Tensor":
        return arr.item()
    if key in bf16_keys:
        t = torch.from_numpy(arr.astype(np.uint16).view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(arr)
    if pinfo.get("dim_order") == [0, 2, 3, 1]:
        t = t.contiguous(memory_format=torch.channels_last)
    return t


def _close(got: torch.Tensor, want: np.ndarray, key: str, bf16_keys, tol) -> str:
    if key in bf16_keys:
        want_t = torch.from_numpy(want.astype(np.uint16).view(np.int16)).view(torch.bfloat16).float()
        got = got.float()
    else:
        want_t = torch.from_numpy(want)
    if tuple(got.shape) != tuple(want_t.shape):
        return f"shape {tuple(got.shape)} != {tuple(want_t.shape)}"
    if got.dtype != want_t.dtype:
        return f"dtype {got.dtype} != {want_t.dtype}"
    if not torch.allclose(got.contiguous(), want_t, rtol=tol["rtol"], atol=tol["atol"]):
        err = (got.double() - want_t.double()).abs().max().item()
        return f"mismatch max|err|={err:.3g}"
    return ""


def check_pte(d: str, fx) -> str:
    npz = np.load(os.path.join(d, fx["files"]["npz"]))
    bf16 = fx["npz"]["bf16_as_uint16"]
    main = fx["main_method"]
    pinputs = fx["methods"][main]["inputs"]
    inputs = [_input_from_npz(npz[f"in{i}"], f"in{i}", bf16, pinputs[i]) for i in range(len(pinputs))]
    m = _load_for_executorch(os.path.join(d, fx["files"]["pte"]))
    outs = m.run_method(main, inputs)
    n_out = len([k for k in npz.files if k.startswith("out")])
    if len(outs) != n_out:
        return f"{len(outs)} outputs != {n_out}"
    for i, o in enumerate(outs):
        msg = _close(o, npz[f"out{i}"], f"out{i}", bf16, fx["tolerance"])
        if msg:
            return f"out{i}: {msg}"
    return "ok"


def _bundled_one(d: str, fx) -> str:
    with open(os.path.join(d, fx["files"]["bpte"]), "rb") as f:
        data = f.read()
    # NB: upstream's BundledModule does not own the buffer; `data` must outlive
    # `bundle` or verify_... segfaults (executorch 1.5.1).
    bundle = _load_bundled_program_from_buffer(data)
    tol = fx["tolerance"]
    n = 0
    for mname, minfo in fx["methods"].items():
        for i in range(minfo["num_test_cases"]):
            # loads test case i's inputs, executes and compares (raises on mismatch).
            # Exact cases get a tiny non-zero tolerance (upstream uses allclose).
            bundle.verify_result_with_bundled_expected_output(
                mname, i, max(tol["rtol"], 1e-7), max(tol["atol"], 1e-9))
            n += 1
    del bundle
    del data
    return f"ok ({n} cases)"


def check_bundled(d: str, fx) -> str:
    """Runs _bundled_one in a child process: upstream aborts/segfaults on some fixtures."""
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--dir", d, "--bundled-one", fx["name"]],
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode == 0 and lines:
        return lines[-1][len("RESULT "):]
    why = {-11: "SIGSEGV", -6: "SIGABRT"}.get(r.returncode, f"rc={r.returncode}")
    asserts = [ln.strip() for ln in r.stderr.splitlines() if "assert failed" in ln or "Error" in ln]
    return f"CRASH {why}" + (f": {asserts[-1][:90]}" if asserts else "")


def check_extra(d: str, fx) -> str:
    if fx["name"] == "stateful":
        m = _load_for_executorch(os.path.join(d, fx["files"]["pte"]))
        exp = fx["sequential_expectation"]
        x = torch.tensor(exp["input"])
        out = None
        for _ in range(exp["calls"]):
            out = m.forward([x])[0]
        if not torch.equal(out, torch.tensor(exp["output_after_calls"])):
            return f"after {exp['calls']} calls got {out.tolist()}"
        return "ok (state persists)"
    if fx["name"] == "dynamic_cat":
        m = _load_for_executorch(os.path.join(d, fx["files"]["pte"]))
        for b in (1, 5, 8):
            x, y = torch.randn(b, 3), torch.randn(b, 3)
            out = m.forward([x, y])[0]
            if not torch.equal(out, torch.cat([x, y], 0)):
                return f"b={b}: wrong result {tuple(out.shape)}"
        return "ok (b=1,5,8)"
    return "-"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=DEFAULT_DIR)
    ap.add_argument("--bundled-one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    if args.bundled_one:
        fx = next(f for f in manifest["fixtures"] if f["name"] == args.bundled_one)
        try:
            print("RESULT " + _bundled_one(args.dir, fx), flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"RESULT ERROR {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}", flush=True)
        return 0
    rows = []
    failed = 0
    for fx in manifest["fixtures"]:
        row = [fx["name"]]
        for fn in (check_pte, check_bundled, check_extra):
            try:
                r = fn(args.dir, fx)
            except Exception as e:  # noqa: BLE001
                r = f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
            known = fx.get("upstream_known_issues", {}).get(fn.__name__.replace("check_", ""))
            if known and not r.startswith("ok"):
                r = "XFAIL " + r  # documented upstream limitation (see manifest)
            elif not (r.startswith("ok") or r == "-"):
                failed += 1
            row.append(r)
        rows.append(row)
    w = [max(len(r[i]) for r in rows + [["fixture", "pte", "bundled", "extra"]]) for i in range(4)]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(["fixture", "pte", "bundled", "extra"])))
    for r in rows:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)))
    for s in manifest.get("skipped", []):
        print(f"{s['name']}: skipped at export ({s['error']})")
    print(f"{len(rows)} fixtures, {failed} failed checks")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
