"""The README's Python examples as a user writes them, type-checked with mypy --strict against the installed stubs
by tests/packaging/stubtest.sh (and run by it too, so the script cannot drift from what works)."""
from __future__ import annotations

import pathlib
import sys

import numpy as np

from executorch.extension.pybindings import portable_lib
from executorch.extension.pybindings.data_loader import PyDataLoader
from executorch.runtime import Runtime

FIXTURES = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path("tests/fixtures/exported")


def main() -> None:
    module = portable_lib._load_for_executorch(FIXTURES / "add.pte")      # str or os.PathLike
    print(module.method_meta("forward"))
    x = np.ones((2, 3), np.float32)
    out = module.forward([x, x])[0]
    print(np.asarray(out))
    meta = module.method_meta("forward")
    tag: str = meta.input_tag(index=0)
    print(tag, meta.num_inputs(), portable_lib.Verification.Minimal.name)

    module = portable_lib._load_for_executorch_from_buffer((FIXTURES / "add.pte").read_bytes())
    outputs = module.run_method("forward", [x, x])
    bundle = portable_lib._load_bundled_program_from_buffer((FIXTURES / "add.bpte").read_bytes())
    bundle.verify_result_with_bundled_expected_output("forward", 0, rtol=1e-5, atol=1e-8)

    program = portable_lib._load_program(str(FIXTURES / "add.pte"))
    method = program.load_method("forward")
    method.set_inputs([x, x])
    method.execute()
    outs = method.get_outputs()
    loader = PyDataLoader.from_path(FIXTURES / "add.pte")
    module = portable_lib._load_for_executorch_from_data_loader(loader)
    try:
        portable_lib._load_for_executorch("missing.pte")
    except FileNotFoundError as e:
        print("missing:", e.filename)
    runtime_program = Runtime.get().load_program(FIXTURES / "add.pte")
    forward = runtime_program.load_method("forward")
    assert forward is not None
    results = forward.execute([x, x])
    names: set[str] = Runtime.get().operator_registry.operator_names
    print(len(results), "aten::add.out" in names)
    portable_lib._set_log_level("error")
    print(len(outputs), len(outs))


if __name__ == "__main__":
    main()
