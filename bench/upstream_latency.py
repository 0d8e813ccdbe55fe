"""Runs in the UPSTREAM runtime's venv (executorch from PyPI): per-call latency of given .pte files.

    <export-venv>/bin/python bench/upstream_latency.py spec.json   ->  prints JSON {name: seconds or error}
    <export-venv>/bin/python bench/upstream_latency.py --serve     ->  reads one spec item a line, answers each

spec.json: [{"name":..., "pte":..., "method":..., "npz":..., "inputs": [["tensor"|"int"|"float", key], ...]}]
"""
import json
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from timing import best_seconds, median_seconds  # noqa: E402

from executorch.extension.pybindings.portable_lib import _load_for_executorch  # noqa: E402

try:  # upstream registers the quantized_decomposed kernels only when this is imported
    import executorch.kernels.quantized  # noqa: F401,E402
except ImportError:
    pass


def llm_latency(item):
    """Prefill of the prompt (one call) and decode (one token per call) of an export_llm program, in seconds per
    token, the same calls bench/run.py makes on our runtime."""
    try:
        import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama:: kernels)
        m = _load_for_executorch(item["pte"])
        prompt = torch.tensor([item["llm"]["prompt"]], dtype=torch.long)
        steps = item["llm"]["decode"]
        zero = torch.tensor([0], dtype=torch.long)
        prefill = median_seconds(lambda: m.forward((prompt, zero)))

        def decode():
            for i in range(steps):
                m.forward((torch.tensor([[7]], dtype=torch.long), torch.tensor([prompt.shape[1] + i], dtype=torch.long)))
        return {f"{item['name']} prefill": prefill / prompt.shape[1], f"{item['name']} decode": median_seconds(decode) / steps}
    except Exception as e:  # report, keep going
        return {f"{item['name']} prefill": f"error: {type(e).__name__}: {str(e)[:120]}"}


def latency(item, modules):
    """{name: seconds or an error string} for one spec item; `modules` keeps loaded programs by path."""
    if "llm" in item:
        return llm_latency(item)
    try:
        if item["pte"] not in modules:
            modules[item["pte"]] = _load_for_executorch(item["pte"])
        m = modules[item["pte"]]
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
        if item.get("timing") == "best":  # per-call overhead: forward() itself, best batch (see timing.py)
            return {item["name"]: best_seconds(lambda: m.forward(inputs, clone))}
        return {item["name"]: median_seconds(lambda: m.run_method(item["method"], inputs, clone))}
    except Exception as e:  # report, keep going
        return {item["name"]: f"error: {type(e).__name__}: {str(e)[:120]}"}


def main():
    if sys.argv[1] == "--serve":  # one spec item per stdin line, one JSON result line each (bench/run.py pairs)
        modules = {}
        for line in sys.stdin:
            print(json.dumps(latency(json.loads(line), modules)), flush=True)
        return
    spec = json.loads(open(sys.argv[1]).read())
    out = {}
    for item in spec:
        out.update(latency(item, {}))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
