"""Writes upstream's operator list, as upstream users get it, to tests/python/data/upstream_operator_names.txt.

    .venv-export/bin/python tools/export/dump_upstream_operators.py

Upstream's portable_lib with its quantized and LLM custom-op libraries loaded (the imports below are how
upstream users get those operators), from the executorch wheel in .venv-export.
"""
import pathlib
from importlib.metadata import version

import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (registers llama::*)
import executorch.kernels.quantized  # noqa: F401  (registers quantized_decomposed::*)
from executorch.extension.pybindings import portable_lib

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "python" / "data" / "upstream_operator_names.txt"
names = sorted(portable_lib._get_operator_names())
OUT.write_text(f"# executorch {version('executorch')}: portable_lib._get_operator_names() with the quantized and "
               f"LLM custom-op libraries loaded ({len(names)} names)\n" + "\n".join(names) + "\n")
print(f"wrote {len(names)} names to {OUT}")
