"""executorch.runtime (Runtime / Program / Method / registries) over portable_lib, as upstream code uses it."""
import io
import pathlib

import numpy as np
import pytest
from conftest import FIXTURES, to_numpy

runtime = pytest.importorskip("executorch.runtime")


def test_runtime_is_a_singleton():
    assert runtime.Runtime.get() is runtime.Runtime.get()


@pytest.mark.parametrize("kind", ["str", "path", "bytes", "bytearray", "file"])
def test_load_program_from_every_kind_of_source(kind):
    pte = FIXTURES / "two_methods.pte"
    data = {"str": lambda: str(pte), "path": lambda: pathlib.Path(pte), "bytes": pte.read_bytes,
            "bytearray": lambda: bytearray(pte.read_bytes()), "file": lambda: io.BytesIO(pte.read_bytes())}[kind]()
    program = runtime.Runtime.get().load_program(data)
    assert program.method_names == {"forward", "times_two"}
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, np.float32)
    np.testing.assert_array_equal(to_numpy(program.load_method("forward").execute([x, y])[0]), x + y)
    np.testing.assert_array_equal(to_numpy(program.load_method("times_two").execute([x])[0]), 2 * x)


def test_methods_are_loaded_once_and_metadata_matches():
    program = runtime.Runtime.get().load_program(FIXTURES / "two_methods.pte")
    method = program.load_method("forward")
    assert program.load_method("forward") is method
    meta = method.metadata
    assert meta.name() == "forward" and meta.num_inputs() == 2 and meta.num_outputs() == 1
    assert list(program.metadata("times_two").input_tensor_meta(0).sizes()) == [2, 3]


def test_unknown_method_and_bad_source_raise():
    program = runtime.Runtime.get().load_program(FIXTURES / "add.pte")
    with pytest.raises(RuntimeError, match="nope"):
        program.load_method("nope")
    with pytest.raises(TypeError, match="expected a path, bytes-like data or a binary file, got int"):
        runtime.Runtime.get().load_program(42)
    with pytest.raises(RuntimeError):
        runtime.Runtime.get().load_program(b"\x00" * 64)


def test_registries_report_what_the_bindings_have():
    rt = runtime.Runtime.get()
    ops = rt.operator_registry.operator_names
    assert isinstance(ops, set) and "aten::add.out" in ops and "aten::convolution.out" in ops
    names = rt.backend_registry.registered_backend_names
    assert isinstance(names, list) and "XnnpackBackend" in names
    from executorch.extension.pybindings import portable_lib
    for name in names:  # a CUDA delegate is registered but unavailable in a CUDA build on a machine without a GPU
        assert rt.backend_registry.is_available(name) is portable_lib._is_available(name)
    assert rt.backend_registry.is_available("XnnpackBackend")
    assert not rt.backend_registry.is_available("NoSuchBackend")


def test_verification_and_etdump_options_pass_through(tmp_path):
    program = runtime.Runtime.get().load_program(FIXTURES / "add.pte", verification=runtime.Verification.Minimal,
                                                 enable_etdump=True)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(to_numpy(program.load_method("forward").execute([x, x])[0]), 2 * x)
    out = tmp_path / "run.etdp"
    program.write_etdump_result_to_file(str(out))
    assert out.read_bytes()[8:12] == b"ED00"
