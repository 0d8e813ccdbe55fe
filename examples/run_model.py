#!/usr/bin/env python3
"""Runs a .pte and prints its signature, the inputs, the outputs and the per-call time.

    python examples/run_model.py                                  # the bundled example model (tests/fixtures/exported/mlp.pte)
    python examples/run_model.py model.pte [method]
    python examples/run_model.py model.pte --method forward --inputs inputs.npz

Inputs come from --inputs (an .npz with in0, in1, ...), else from the .npz beside the model when it has one (the
project's fixtures do), else they are random. Non-tensor inputs (ints, floats, bools) are specialised by the
exporter, so they cannot be made up: pass them in the .npz as 0-d arrays. bfloat16 tensors, which NumPy lacks, are
stored in an .npz as their uint16 bit patterns and passed as torch tensors (torch is needed only for those). The
inputs are made as the `etrt run` command makes them (executorch_portable_lib.cli.make_inputs).
"""
import argparse
import pathlib
import sys
import time

from executorch.extension.pybindings import portable_lib
from executorch_portable_lib.cli import UsageError, describe, make_inputs

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT = HERE.parent / "tests" / "fixtures" / "exported" / "mlp.pte"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?", type=pathlib.Path, default=DEFAULT)
    parser.add_argument("method_pos", nargs="?", metavar="method", help="the method to run (default: forward)")
    parser.add_argument("--method", default=None)
    parser.add_argument("--inputs", type=pathlib.Path, default=None, help=".npz with in0, in1, ...")
    parser.add_argument("--calls", type=int, default=200, help="calls timed for the per-call time")
    args = parser.parse_args(argv)
    method = args.method or args.method_pos or "forward"

    module = portable_lib._load_for_executorch(str(args.model))
    meta = module.method_meta(method)
    print(f"model: {args.model.name}  method: {method}")
    print(meta)
    beside = args.model.with_suffix(".npz")
    npz = args.inputs or (beside if beside.exists() else None)
    try:
        inputs = make_inputs(meta, str(npz) if npz else None)
    except UsageError as e:
        raise SystemExit(str(e))
    for i, x in enumerate(inputs):
        print(f"input {i}: {describe(x)}")
    outputs = module.run_method(method, inputs)
    for i, o in enumerate(outputs):
        print(f"output {i}: {type(o).__name__} {describe(o)}")
    start = time.perf_counter()
    for _ in range(args.calls):
        module.run_method(method, inputs)
    per_call = (time.perf_counter() - start) / max(args.calls, 1)
    print(f"per-call time: {per_call * 1e6:.1f} us (mean of {args.calls} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
