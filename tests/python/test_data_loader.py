"""_load_for_executorch_from_data_loader and executorch.extension.pybindings.data_loader.PyDataLoader.

Each constructor (path, bytes-like, Python reader) against _load_for_executorch on the same program; readers that
fail (an exception, a short or long read, the wrong declared size, something that is not bytes) fail the load with
a RuntimeError naming the read, never the process; lifetimes (the module keeps its loader and what the loader reads
alive); .ptd external data, ETDump and the debug buffer as _load_for_executorch honours them; and a C++ extension
that makes loaders with etrt/adapters/data_loader.h (tests/python/ext, when it is built).
"""
import gc
import glob
import importlib
import mmap
import os
import pathlib
import weakref

import numpy as np
import pytest

from conftest import FIXTURES, ROOT, to_numpy

UPSTREAM_NAMES = [
    "_create_profile_block", "_dump_profile_results", "_get_operator_names", "_get_registered_backend_names",
    "_is_available", "_load_bundled_program_from_buffer", "_load_for_executorch", "_load_for_executorch_from_buffer",
    "_load_for_executorch_from_bundled_program", "_load_for_executorch_from_data_loader", "_load_program",
    "_load_program_from_buffer", "_reset_profile_results", "_threadpool_get_thread_count",
    "_unsafe_reset_threadpool", "BundledModule", "ExecuTorchMethod", "ExecuTorchModule", "ExecuTorchProgram",
    "MethodMeta", "TensorInfo", "Verification",
]


@pytest.fixture(scope="module")
def PyDataLoader():
    from executorch.extension.pybindings.data_loader import PyDataLoader as cls
    return cls


@pytest.fixture(scope="module")
def mlp():
    """(path, bytes, inputs, expected outputs) of a real-exporter fixture."""
    path = FIXTURES / "mlp.pte"
    z = np.load(FIXTURES / "mlp.npz")
    return path, path.read_bytes(), [z["in0"]], [z["out0"]]


def outputs(module, inputs):
    return [to_numpy(o) for o in module.forward(inputs)]


def same_as_load_for_executorch(pl, module, path, inputs, **kwargs):
    want = outputs(pl._load_for_executorch(str(path), **kwargs), inputs)
    got = outputs(module, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    return got


class Reader:
    """A custom source over bytes: what a Python-side decompressor or downloader would look like."""

    def __init__(self, data):
        self.data = data
        self.calls = []

    def read(self, offset, size):
        self.calls.append((offset, size))
        return self.data[offset:offset + size]


# ---- the names and the type --------------------------------------------------------------------------------------

def test_upstream_names_are_all_there(portable_lib):
    missing = [n for n in UPSTREAM_NAMES if not hasattr(portable_lib, n)]
    assert missing == []
    assert "PyDataLoader" not in dir(portable_lib)  # upstream does not re-export it either


def test_type_is_registered_once_and_has_no_plain_constructor(PyDataLoader):
    from executorch_portable_lib import _C
    assert _C.PyDataLoader is PyDataLoader
    assert PyDataLoader.__module__ == "executorch.extension.pybindings.data_loader"
    importlib.reload(importlib.import_module("executorch.extension.pybindings.data_loader"))  # no re-registration
    with pytest.raises(TypeError):
        PyDataLoader()  # upstream's has no constructor; ours are the named ones


def test_none_is_not_a_loader(portable_lib):
    with pytest.raises(TypeError):
        portable_lib._load_for_executorch_from_data_loader(None)


# ---- constructors ------------------------------------------------------------------------------------------------

def test_from_path(portable_lib, PyDataLoader, mlp):
    path, _, inputs, expected = mlp
    for arg in (str(path), path):  # str or os.PathLike
        loader = PyDataLoader.from_path(arg)
        assert repr(loader) == f"PyDataLoader(path='{path}')"
        m = portable_lib._load_for_executorch_from_data_loader(loader)
        assert type(m) is portable_lib.ExecuTorchModule
        got = same_as_load_for_executorch(portable_lib, m, path, inputs)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)
        assert m.method_names() == ["forward"]


def test_from_path_errors_at_construction(PyDataLoader, tmp_path):
    with pytest.raises(RuntimeError, match=r"PyDataLoader.from_path: cannot open '.*nope.pte': No such file"):
        PyDataLoader.from_path(str(tmp_path / "nope.pte"))
    with pytest.raises(TypeError, match="must be a str or os.PathLike"):
        PyDataLoader.from_path(42)


def test_from_buffer(portable_lib, PyDataLoader, mlp):
    path, data, inputs, _ = mlp
    sources = [data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8), np.array(list(data), np.uint8)]
    for src in sources:
        loader = PyDataLoader.from_buffer(src)
        copied = ", copied at each load" if not memoryview(src).readonly else ""
        assert repr(loader) == f"PyDataLoader({type(src).__name__} of {len(data)} bytes{copied})"
        same_as_load_for_executorch(portable_lib, portable_lib._load_for_executorch_from_data_loader(loader), path,
                                    inputs)


def test_from_buffer_mmap(portable_lib, PyDataLoader, mlp):
    path, _, inputs, _ = mlp
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    m = portable_lib._load_for_executorch_from_data_loader(PyDataLoader.from_buffer(mm))
    same_as_load_for_executorch(portable_lib, m, path, inputs)
    with pytest.raises(BufferError):
        mm.close()  # the module reads it in place and holds it


def test_from_buffer_rejects_what_is_not_bytes_like(PyDataLoader):
    for bad in ("text", 3, None, np.zeros((4, 4), np.uint8)[:, ::2]):
        with pytest.raises(TypeError, match="PyDataLoader.from_buffer: expected a bytes-like object"):
            PyDataLoader.from_buffer(bad)


def test_writable_buffer_is_copied_at_load(portable_lib, PyDataLoader, mlp):
    path, data, inputs, _ = mlp
    buf = bytearray(data)
    loader = PyDataLoader.from_buffer(buf)
    m = portable_lib._load_for_executorch_from_data_loader(loader)
    buf[:] = bytes(len(buf))  # the loaded program is a copy: this cannot reach it
    same_as_load_for_executorch(portable_lib, m, path, inputs)
    with pytest.raises(BufferError):
        buf.append(0)  # exported while the loader lives
    with pytest.raises(RuntimeError, match="not an ExecuTorch program"):
        portable_lib._load_for_executorch_from_data_loader(loader)  # a later load sees the zeros
    del loader, m
    gc.collect()
    buf.append(0)


def test_from_reader(portable_lib, PyDataLoader, mlp):
    path, data, inputs, _ = mlp
    reader = Reader(data)
    loader = PyDataLoader.from_reader(reader, len(data))
    assert repr(loader) == f"PyDataLoader(reader=Reader, size={len(data)})"
    assert reader.calls == []  # nothing is read before a load
    m = portable_lib._load_for_executorch_from_data_loader(loader)
    assert reader.calls == [(0, len(data))]  # one chunk: programs up to 16 MiB
    same_as_load_for_executorch(portable_lib, m, path, inputs)
    # Any bytes-like object will do as a read's result.
    for wrap in (bytearray, memoryview, lambda b: np.frombuffer(b, np.uint8)):
        class Wrapped(Reader):
            def read(self, offset, size, wrap=wrap):
                return wrap(super().read(offset, size))
        m = portable_lib._load_for_executorch_from_data_loader(PyDataLoader.from_reader(Wrapped(data), len(data)))
        same_as_load_for_executorch(portable_lib, m, path, inputs)


def test_from_reader_argument_errors(PyDataLoader, mlp):
    data = mlp[1]
    with pytest.raises(TypeError, match=r"reader must have a method read\(offset, size\), got bytes"):
        PyDataLoader.from_reader(data, len(data))
    with pytest.raises(TypeError, match="size must be an int, got str"):
        PyDataLoader.from_reader(Reader(data), "10")
    with pytest.raises(TypeError, match="size must be an int, got bool"):
        PyDataLoader.from_reader(Reader(data), True)
    with pytest.raises(ValueError, match="size must be a byte count >= 0, got -1"):
        PyDataLoader.from_reader(Reader(data), -1)
    with pytest.raises(ValueError, match="size must be a byte count >= 0"):
        PyDataLoader.from_reader(Reader(data), 1 << 70)


# ---- readers that fail: errors of the load, never a crash --------------------------------------------------------

def load_error(pl, loader):
    with pytest.raises(RuntimeError) as e:
        pl._load_for_executorch_from_data_loader(loader)
    return str(e.value)


def test_reader_short_read(portable_lib, PyDataLoader, mlp):
    data = mlp[1]
    n = len(data)

    class Short(Reader):
        def read(self, offset, size):
            return super().read(offset, size)[:size // 2]

    msg = load_error(portable_lib, PyDataLoader.from_reader(Short(data), n))
    assert msg.startswith(f"PyDataLoader(reader=Short, size={n}): read(0, {n}) returned {n // 2} bytes, expected {n} "
                          f"(short read: the size given, {n}, must be the source's size in bytes)")
    assert msg.endswith("(Error::AccessFailed 0x22)")


def test_reader_declared_size_wrong(portable_lib, PyDataLoader, mlp):
    data = mlp[1]
    n = len(data)
    # Too large: the source ends early, which is a short read.
    msg = load_error(portable_lib, PyDataLoader.from_reader(Reader(data), n + 100))
    assert f"read(0, {n + 100}) returned {n} bytes, expected {n + 100} (short read" in msg
    # Too small: the bytes read are a truncated program.
    msg = load_error(portable_lib, PyDataLoader.from_reader(Reader(data), n - 100))
    assert "InvalidProgram" in msg
    # Zero: nothing to read.
    msg = load_error(portable_lib, PyDataLoader.from_reader(Reader(data), 0))
    assert "file of 0 bytes is too small" in msg


def test_reader_returns_too_much_or_not_bytes(portable_lib, PyDataLoader, mlp):
    data = mlp[1]
    n = len(data)

    class Long(Reader):
        def read(self, offset, size):
            return bytes(size + 1)

    assert f"read(0, {n}) returned {n + 1} bytes, expected {n} (Error::AccessFailed" in load_error(
        portable_lib, PyDataLoader.from_reader(Long(data), n))
    for bad, name in (("text", "str"), (None, "NoneType"), (12, "int")):
        class Bad(Reader):
            def read(self, offset, size, bad=bad):
                return bad
        msg = load_error(portable_lib, PyDataLoader.from_reader(Bad(data), n))
        assert f"read(0, {n}) returned {name}, expected a bytes-like object of {n} bytes" in msg


def test_reader_exceptions(portable_lib, PyDataLoader, mlp):
    data = mlp[1]
    n = len(data)

    class Raising(Reader):
        def read(self, offset, size):
            raise OSError(5, "Input/output error")

    msg = load_error(portable_lib, PyDataLoader.from_reader(Raising(data), n))
    assert msg == (f"PyDataLoader(reader=Raising, size={n}): read(0, {n}) raised OSError: [Errno 5] Input/output "
                   f"error (Error::AccessFailed 0x22)")

    class WrongSignature:
        def read(self):
            return b""

    assert "raised TypeError" in load_error(portable_lib, PyDataLoader.from_reader(WrongSignature(), n))

    class Interrupted(Reader):
        def read(self, offset, size):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # not a data error: passed through unchanged
        portable_lib._load_for_executorch_from_data_loader(PyDataLoader.from_reader(Interrupted(data), n))


def test_failed_load_leaves_the_loader_usable(portable_lib, PyDataLoader, mlp):
    path, data, inputs, _ = mlp

    class Flaky(Reader):
        def read(self, offset, size):
            if len(self.calls) == 0:
                self.calls.append((offset, size))
                raise ConnectionError("reset by peer")
            return super().read(offset, size)

    reader = Flaky(data)
    loader = PyDataLoader.from_reader(reader, len(data))
    assert "raised ConnectionError: reset by peer" in load_error(portable_lib, loader)
    m = portable_lib._load_for_executorch_from_data_loader(loader)  # the same loader, a second try
    same_as_load_for_executorch(portable_lib, m, path, inputs)
    assert reader.calls == [(0, len(data)), (0, len(data))]


# ---- lifetimes ---------------------------------------------------------------------------------------------------

def test_loader_serves_several_modules(portable_lib, PyDataLoader, mlp):
    path, data, inputs, _ = mlp
    reader = Reader(data)
    loader = PyDataLoader.from_reader(reader, len(data))
    a = portable_lib._load_for_executorch_from_data_loader(loader)
    b = portable_lib._load_for_executorch_from_data_loader(loader)
    assert len(reader.calls) == 2  # read at each load
    for m in (a, b):
        same_as_load_for_executorch(portable_lib, m, path, inputs)


def test_module_keeps_the_loader_and_its_reader_alive(portable_lib, PyDataLoader, mlp):
    path, data, inputs, _ = mlp
    reader = Reader(data)
    alive = weakref.ref(reader)
    loader = PyDataLoader.from_reader(reader, len(data))
    m = portable_lib._load_for_executorch_from_data_loader(loader)
    del loader, reader
    gc.collect()
    assert alive() is not None  # held by the loader, which the module holds
    same_as_load_for_executorch(portable_lib, m, path, inputs)
    meta = m.method_meta("forward")
    del m
    gc.collect()
    assert meta.num_inputs() == 1
    del meta
    gc.collect()
    assert alive() is None  # released with the module


def test_module_keeps_a_buffer_it_reads_in_place_alive(portable_lib, PyDataLoader, mlp):
    path, data, inputs, _ = mlp
    arr = np.frombuffer(bytes(data), np.uint8)  # read-only: read in place, no copy
    assert not arr.flags.writeable
    alive = weakref.ref(arr)
    m = portable_lib._load_for_executorch_from_data_loader(PyDataLoader.from_buffer(arr))
    del arr
    gc.collect()
    assert alive() is not None
    expected = same_as_load_for_executorch(portable_lib, m, path, inputs)
    outs = m.forward(inputs, clone_outputs=False)  # borrowed views keep the module (and the buffer) alive
    del m
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(to_numpy(outs[0]), expected[0])
    del outs
    gc.collect()
    assert alive() is None


# ---- the same options as _load_for_executorch --------------------------------------------------------------------

def test_ptd_external_data(portable_lib, PyDataLoader, corpus):
    if not (corpus / "xor.ptd").exists():
        pytest.skip(f"xor.ptd not found in the shared corpus at {corpus}")
    x, y = np.array([[1, 0]], np.float32), np.array([1], np.int64)
    without = portable_lib._load_for_executorch_from_data_loader(PyDataLoader.from_path(corpus / "xor.pte"))
    with pytest.raises(RuntimeError, match="external data"):
        without.forward([x, y])
    for data_path in (str(corpus / "xor.ptd"), corpus / "xor.ptd"):
        loader = PyDataLoader.from_buffer((corpus / "xor.pte").read_bytes())
        m = portable_lib._load_for_executorch_from_data_loader(loader, data_path=data_path)
        got = same_as_load_for_executorch(portable_lib, m, corpus / "xor.pte", [x, y], data_path=str(data_path))
        assert abs(float(got[0]) - 0.683540) < 1e-5
    with pytest.raises(RuntimeError, match="cannot open"):
        portable_lib._load_for_executorch_from_data_loader(loader, data_path=str(corpus / "nope.ptd"))


def test_etdump_and_debug_buffer(portable_lib, PyDataLoader, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("etdump_dump", ROOT / "tools" / "etdump_dump.py")
    reader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reader)
    path = FIXTURES / "add_mul.pte"
    x = [np.full((2, 2), v, np.float32) for v in (2.0, 3.0, 1.0)]
    loader = PyDataLoader.from_path(path)
    m = portable_lib._load_for_executorch_from_data_loader(loader, enable_etdump=True, debug_buffer_size=1 << 12)
    assert m.has_etdump()
    np.testing.assert_array_equal(to_numpy(m.forward(x)[0]), np.full((2, 2), 7.0, np.float32))
    m.write_etdump_result_to_file(str(tmp_path / "a.etdp"), str(tmp_path / "a.bin"))
    assert (tmp_path / "a.bin").stat().st_size == 1 << 12  # the whole debug buffer, as _load_for_executorch's
    [run] = [r for r in reader.parse((tmp_path / "a.etdp").read_bytes())["runs"] if r["name"] == "Execute"]
    names = [e["name"] for e in run["events"] if e["kind"] == "profile"]
    assert names == ["native_call_mul.out", "OPERATOR_CALL", "native_call_add.out", "OPERATOR_CALL",
                     "Method::execute"]
    finals = [e for e in run["events"] if e["kind"] == "debug" and e["value"]["output"]]
    np.testing.assert_array_equal(reader.value(finals[0], (tmp_path / "a.bin").read_bytes()), np.full((2, 2), 7.0))
    # The overflow of a too small debug buffer raises, as it does for _load_for_executorch.
    small = portable_lib._load_for_executorch_from_data_loader(loader, enable_etdump=True, debug_buffer_size=100)
    with pytest.raises(RuntimeError, match="debug buffer overflow"):
        small.forward(x)
    # No ETDump unless asked for; a debug buffer alone is ignored with a log line.
    plain = portable_lib._load_for_executorch_from_data_loader(loader, debug_buffer_size=1024)
    assert not plain.has_etdump()
    assert "debug_buffer_size=1024 has no effect without enable_etdump=True" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="No etdump found"):
        plain.write_etdump_result_to_file(str(tmp_path / "b.etdp"))


def test_bundled_program_through_a_loader(portable_lib, PyDataLoader):
    """A .bpte runs its embedded program, as with _load_for_executorch."""
    m = portable_lib._load_for_executorch_from_data_loader(PyDataLoader.from_path(FIXTURES / "add.bpte"))
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(to_numpy(m.forward([x, x])[0]), 2 * x)


def test_garbage_is_a_load_error(portable_lib, PyDataLoader):
    for data in (b"", b"\x00" * 7, b"not a program at all, just some text bytes"):
        with pytest.raises(RuntimeError, match="InvalidProgram"):
            portable_lib._load_for_executorch_from_data_loader(PyDataLoader.from_buffer(data))


# ---- a C++ extension making loaders (tests/python/ext) ------------------------------------------------------------

def downstream_extension():
    """The test extension built by meson with -Dtests=true (ETRT_TEST_EXTENSION_DIR names its folder)."""
    dirs = [os.environ["ETRT_TEST_EXTENSION_DIR"]] if os.environ.get("ETRT_TEST_EXTENSION_DIR") else \
        [str(ROOT / b / "tests" / "python" / "ext") for b in ("build", "build-tests")]
    for d in dirs:
        found = glob.glob(os.path.join(d, "_etrt_test_downstream_loader*.so"))
        if found:
            spec = importlib.util.spec_from_file_location("_etrt_test_downstream_loader", found[0])
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    pytest.skip(f"the test extension _etrt_test_downstream_loader is not built (looked in {', '.join(dirs)}; "
                "meson setup with -Dtests=true builds it, ETRT_TEST_EXTENSION_DIR points at it)")


def test_cpp_extension_makes_loaders(portable_lib, PyDataLoader, mlp, tmp_path):
    ext = downstream_extension()
    path, data, inputs, _ = mlp
    packed = bytes(b ^ 0x5A for b in data)
    (tmp_path / "mlp.packed").write_bytes(packed)
    loader = ext.open_packed(str(tmp_path / "mlp.packed"), 0x5A)
    assert type(loader) is PyDataLoader  # the one registered type, returned by another extension
    assert repr(loader) == f"PyDataLoader(packed file '{tmp_path / 'mlp.packed'}')"
    m = portable_lib._load_for_executorch_from_data_loader(loader)
    del loader
    gc.collect()
    same_as_load_for_executorch(portable_lib, m, path, inputs)
    shared = ext.from_unpacked(packed, 0x5A)
    for _ in range(2):
        same_as_load_for_executorch(portable_lib, portable_lib._load_for_executorch_from_data_loader(shared), path,
                                    inputs)
    # Its failures are errors of the load, with the loader's description in front.
    (tmp_path / "tiny.packed").write_bytes(b"\x01")
    with pytest.raises(RuntimeError, match=r"^PyDataLoader\(packed file '.*tiny.packed'\): unpacking failed: "
                                           r"truncated file \(Error::InvalidProgram 0x23\)$"):
        portable_lib._load_for_executorch_from_data_loader(ext.open_packed(str(tmp_path / "tiny.packed"), 1))
    with pytest.raises(RuntimeError, match=r"cannot open '.*gone.packed' \(Error::AccessFailed 0x22\)"):
        portable_lib._load_for_executorch_from_data_loader(ext.open_packed(str(tmp_path / "gone.packed"), 1))
