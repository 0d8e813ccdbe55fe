#!/usr/bin/env python3
"""Runs a .pte and prints its signature, the inputs, the outputs and the per-call time.

    python examples/run_model.py                                  # the bundled example model (tests/fixtures/exported/mlp.pte)
    python examples/run_model.py model.pte [method]
    python examples/run_model.py model.pte --method forward --inputs inputs.npz

Inputs come from --inputs (an .npz with in0, in1, ...), else from the .npz beside the model when it has one (the
project's fixtures do), else they are random. Non-tensor inputs (ints, floats, bools) are specialised by the
exporter, so they cannot be made up: pass them in the .npz as 0-d arrays. bfloat16 tensors, which NumPy lacks, are
stored in an .npz as their uint16 bit patterns and passed as torch tensors (torch is needed only for those).
"""
import argparse
import pathlib
import sys
import time

import numpy as np

from executorch.extension.pybindings import portable_lib

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT = HERE.parent / "tests" / "fixtures" / "exported" / "mlp.pte"

# ExecuTorch ScalarType codes -> NumPy dtypes (bfloat16, code 15, has none: see as_bfloat16).
NUMPY_DTYPES = {0: np.uint8, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.int64, 5: np.float16, 6: np.float32,
                7: np.float64, 11: np.bool_}
BFLOAT16 = 15
SCALAR_TAGS = {"Int": int, "Double": float, "Bool": bool}


def as_bfloat16(bits: np.ndarray):
    """A torch bfloat16 tensor from uint16 bit patterns."""
    try:
        import torch
    except ImportError:
        raise SystemExit("this model takes a bfloat16 input, which NumPy cannot hold: install torch to pass it")
    return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).view(torch.bfloat16)


def random_input(meta, i: int, rng: np.random.Generator):
    tag = meta.input_tag(i)
    if tag != "Tensor":
        raise SystemExit(f"input {i} ({tag}) is specialised by the exporter to the value it was exported with: "
                         "pass it with --inputs FILE.npz (a 0-d array named in{i})")
    info = meta.input_tensor_meta(i)
    sizes = tuple(info.sizes())
    if info.dtype() == BFLOAT16:
        return as_bfloat16(rng.standard_normal(sizes).astype(np.float32).view(np.uint32) >> 16)
    dtype = NUMPY_DTYPES.get(info.dtype())
    if dtype is None:
        raise SystemExit(f"input {i} has ScalarType {info.dtype()}, which this example cannot make up: "
                         "pass it with --inputs FILE.npz")
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(sizes).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, sizes).astype(np.bool_)
    return rng.integers(0, 10, sizes).astype(dtype)


def given_input(meta, i: int, value: np.ndarray):
    tag = meta.input_tag(i)
    if tag in SCALAR_TAGS:
        return SCALAR_TAGS[tag](value.item())
    if tag == "Tensor" and meta.input_tensor_meta(i).dtype() == BFLOAT16 and value.dtype == np.uint16:
        return as_bfloat16(value)
    return value


def describe(x) -> str:
    """Prints any input or output: NumPy arrays, torch tensors (bfloat16 too), ExecuTorchResult, scalars."""
    if type(x).__module__.startswith("torch"):
        dtype = str(x.dtype).replace("torch.", "")
        values = x.float().numpy() if dtype == "bfloat16" else x.numpy()
        return f"{dtype}{list(x.shape)}\n{values}"
    if isinstance(x, (int, float, bool)):
        return f"{type(x).__name__} {x}"
    try:
        a = np.asarray(x)
    except (TypeError, ValueError, BufferError) as e:  # a dtype NumPy has no type for (bfloat16)
        return f"{type(x).__name__} (not viewable as a NumPy array: {e})"
    return f"{a.dtype}{list(a.shape)}\n{a}"


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
    npz = args.inputs or (args.model.with_suffix(".npz") if args.model.with_suffix(".npz").exists() else None)
    given = np.load(npz) if npz else None
    rng = np.random.default_rng(0)
    inputs = []
    for i in range(meta.num_inputs()):
        if given is not None and f"in{i}" in given.files:
            x = given_input(meta, i, given[f"in{i}"])
        else:
            x = random_input(meta, i, rng)
        inputs.append(x)
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
