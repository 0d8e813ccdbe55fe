#!/usr/bin/env python3
"""Runs a .pte with random (or given) inputs and prints inputs, outputs and the per-call time.

    python examples/run_model.py                      # the bundled example model (tests/fixtures/exported/mlp.pte)
    python examples/run_model.py model.pte [method]
"""
import pathlib
import sys
import time

import numpy as np

from executorch.extension.pybindings import portable_lib

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT = HERE.parent / "tests" / "fixtures" / "exported" / "mlp.pte"

NUMPY_DTYPES = {0: np.uint8, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.int64, 5: np.float16, 6: np.float32,
                7: np.float64, 11: np.bool_}


def main() -> int:
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    method = sys.argv[2] if len(sys.argv) > 2 else "forward"
    module = portable_lib._load_for_executorch(str(path))
    meta = module.method_meta(method)
    print(f"model: {path.name}  method: {method}")
    print(meta)
    rng = np.random.default_rng(0)
    inputs = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        dtype = NUMPY_DTYPES[info.dtype()]
        x = rng.standard_normal(info.sizes()).astype(dtype) if np.issubdtype(dtype, np.floating) else \
            rng.integers(0, 10, info.sizes()).astype(dtype)
        inputs.append(x)
        print(f"input {i}: {x.dtype}{list(x.shape)}\n{x}")
    outputs = module.run_method(method, inputs)
    for i, o in enumerate(outputs):
        print(f"output {i}: {type(o).__name__}\n{np.asarray(o)}")
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        module.run_method(method, inputs)
    per_call = (time.perf_counter() - start) / n
    print(f"per-call time: {per_call * 1e6:.1f} us (mean of {n} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
