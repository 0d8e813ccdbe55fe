"""Runs in the UPSTREAM runtime's venv (executorch from PyPI): per-call latency of given .pte files.

    <export-venv>/bin/python bench/upstream_latency.py spec.json   ->  prints JSON {name: seconds or error}

spec.json: [{"name":..., "pte":..., "method":..., "npz":..., "inputs": [["tensor"|"int"|"float", key], ...]}]
"""
import json
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from timing import median_seconds  # noqa: E402

from executorch.extension.pybindings.portable_lib import _load_for_executorch  # noqa: E402

try:  # upstream registers the quantized_decomposed kernels only when this is imported
    import executorch.kernels.quantized  # noqa: F401,E402
except ImportError:
    pass


def main():
    spec = json.loads(open(sys.argv[1]).read())
    out = {}
    for item in spec:
        try:
            m = _load_for_executorch(item["pte"])
            z = np.load(item["npz"]) if item.get("npz") else None
            inputs = []
            for kind, key in item["inputs"]:
                if kind == "int":
                    inputs.append(int(z[key]))
                elif kind == "float":
                    inputs.append(float(z[key]))
                elif kind == "npy":
                    inputs.append(torch.from_numpy(np.load(key)))
                else:
                    inputs.append(torch.from_numpy(np.ascontiguousarray(z[key])))
            clone = item.get("clone", True)
            out[item["name"]] = median_seconds(lambda: m.run_method(item["method"], inputs, clone))
        except Exception as e:  # report, keep going
            out[item["name"]] = f"error: {type(e).__name__}: {str(e)[:120]}"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
