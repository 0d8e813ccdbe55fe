"""The portable_lib contract on CPU: Method/Program API, same-object reads, threads, ETDump, metadata, stubs."""
import importlib.util
import pathlib
import threading

import numpy as np
import pytest

from conftest import FIXTURES, ROOT, to_numpy


def test_program_and_method_api(portable_lib):
    prog = portable_lib._load_program(str(FIXTURES / "two_methods.pte"))
    assert prog.num_methods() == 2
    names = {prog.get_method_name(0), prog.get_method_name(1)}
    assert names == {"forward", "times_two"}
    with pytest.raises(RuntimeError, match="out of range"):
        prog.get_method_name(2)
    method = prog.load_method("forward")
    x = np.ones((2, 3), np.float32)
    with pytest.raises(RuntimeError, match="has not been executed"):
        method.get_outputs()
    method.set_inputs([x, x])
    method.execute()
    first = method.get_outputs()
    again = method.get_outputs()
    assert all(a is b for a, b in zip(first, again))  # clone_outputs=True: the same objects within one execution
    borrowed = method.get_outputs(clone_outputs=False)
    assert borrowed[0] is not first[0]
    assert all(a is b for a, b in zip(first, method.get_outputs()))  # a borrowing read in between changes nothing
    method.set_inputs([x, 2 * x])
    with pytest.raises(RuntimeError, match="set_inputs was called after the last execute"):
        method.get_outputs()
    method.execute()
    np.testing.assert_array_equal(to_numpy(method.get_outputs()[0]), 3 * x)
    np.testing.assert_array_equal(to_numpy(first[0]), 2 * x)  # the earlier clone was not overwritten
    with pytest.raises(RuntimeError, match="unknown method"):
        prog.load_method("nope")


def test_method_meta_details(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "channels_last.pte"))
    info = m.method_meta("forward").input_tensor_meta(0)
    assert info.dim_order() == (0, 2, 3, 1)
    assert info.device() == "cpu"
    meta = portable_lib._load_for_executorch(str(FIXTURES / "scalar_inputs.pte")).method_meta("forward")
    text = repr(meta)  # non-tensor inputs are shown by their tag instead of raising
    assert "'Int'" in text and "'Double'" in text


def test_channels_last_input_converted(portable_lib):
    """An NCHW-contiguous input for a channels-last method is copied into the exported layout on the host."""
    m = portable_lib._load_for_executorch(str(FIXTURES / "channels_last.pte"))
    z = np.load(FIXTURES / "channels_last.npz")
    x = np.ascontiguousarray(z["in0"])  # logical NCHW, row-major
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # same values, channels-last strides
    a = to_numpy(m.forward([x])[0])
    b = to_numpy(m.forward([nhwc])[0])
    np.testing.assert_allclose(a, z["out0"], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(a, b)


def test_stateful_attribute_is_a_view(portable_lib):
    prog = portable_lib._load_program(str(FIXTURES / "stateful.pte"))
    method = prog.load_method("forward")
    assert method.method_meta().num_attributes() == 1
    state = method.get_attribute("state")
    method.call([np.ones(3, np.float32)])
    np.testing.assert_array_equal(to_numpy(state), [1, 1, 1])  # the view sees the in-place update
    with pytest.raises(RuntimeError, match="no attribute 'nope'"):
        method.get_attribute("nope")


def test_threads_share_a_module(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "mlp.pte"))
    z = np.load(FIXTURES / "mlp.npz")
    x = z["in0"]
    expected = to_numpy(m.forward([x])[0])
    errors = []

    def worker(k):
        try:
            for i in range(50):
                scale = np.float32(1 + (k * 50 + i) % 7)
                out = to_numpy(m.forward([x * scale])[0])
                ref = to_numpy(portable_lib._load_for_executorch(str(FIXTURES / "mlp.pte")).forward([x * scale])[0]) \
                    if i == 0 else None
                if ref is not None and not np.allclose(out, ref, rtol=1e-5, atol=1e-6):
                    errors.append((k, i))
                if scale == 1 and not np.allclose(out, expected, rtol=1e-5, atol=1e-6):
                    errors.append((k, i))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_etdump_written_and_parsed(portable_lib, tmp_path):
    m = portable_lib._load_for_executorch(str(FIXTURES / "add.pte"), enable_etdump=True)
    assert m.has_etdump()
    x = np.ones((2, 3), np.float32)
    m.forward([x, x])
    m.forward([x, x])
    path = tmp_path / "run.etdp"
    m.write_etdump_result_to_file(str(path))
    data = path.read_bytes()
    assert data[8:12] == b"ED00" and int.from_bytes(data[:4], "little") == len(data) - 4
    spec = importlib.util.spec_from_file_location("etdump_dump", ROOT / "tools" / "etdump_dump.py")
    reader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reader)
    parsed = reader.parse(data) if hasattr(reader, "parse") else reader.read_etdump(data)
    text = repr(parsed)
    assert "Default" in text and "Execute" in text and "native_call_add.out" in text and "Method::execute" in text
    no = portable_lib._load_for_executorch(str(FIXTURES / "add.pte"))
    assert not no.has_etdump()
    with pytest.raises(RuntimeError, match="No etdump found"):
        no.write_etdump_result_to_file(str(tmp_path / "x.etdp"))


def test_result_dlpack_versions(portable_lib):
    if portable_lib._output_mode == "torch":
        pytest.skip("ExecuTorchResult only")
    m = portable_lib._load_for_executorch(str(FIXTURES / "add.pte"))
    x = np.ones((2, 3), np.float32)
    r = m.forward([x, x])[0]
    assert r.__dlpack_device__() == (1, 0)
    legacy = r.__dlpack__()
    versioned = r.__dlpack__(max_version=(1, 0))
    assert "dltensor" in repr(legacy) and "dltensor_versioned" in repr(versioned)
    copied = np.from_dlpack(r, copy=True)
    assert copied.ctypes.data != np.asarray(r).ctypes.data
    assert r.to_host().shape == (2, 3)


def _signature_names(text: str) -> list[str]:
    """Argument names of a signature's argument list ('*' kept), splitting on top-level commas only."""
    names, depth, part = [], 0, ""
    for ch in text + ",":
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            part = part.strip()
            if part:
                names.append(part.split(":")[0].split("=")[0].strip())
            part = ""
        else:
            part += ch
    return [n for n in names if n != "self"]


def test_generated_stubs_match_the_runtime(portable_lib, tmp_path):
    """The stubs and the registrations are both written from gen/surface.toml: every public name of the module is in
    the stub, and every function's and method's argument names (with '*' where keyword-only ones start) are the ones
    the module reports at run time."""
    import ast
    import re
    import subprocess
    import sys

    pyi = tmp_path / "portable_lib.pyi"
    subprocess.run([sys.executable, str(ROOT / "gen" / "surface.py"), "--stub-file", "portable_lib", str(pyi)],
                   check=True)
    tree = ast.parse(pyi.read_text())
    import executorch.extension.pybindings.portable_lib as pl

    stubbed = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names = [n for n in dir(pl) if not n.startswith("__") and n != "_output_mode"]
    assert [n for n in names if n not in stubbed] == []

    def stub_names(fn: ast.FunctionDef) -> list[str]:
        a = fn.args
        out = [x.arg for x in a.args if x.arg != "self"]
        return out + (["*"] + [x.arg for x in a.kwonlyargs] if a.kwonlyargs else [])

    def runtime_names(obj, name: str) -> list[str]:
        m = re.match(rf"{re.escape(name)}\((.*)\) -> ", (obj.__doc__ or "").split("\n")[0])
        assert m, f"{name}: no signature in its docstring: {obj.__doc__!r}"
        return _signature_names(m.group(1))

    checked = 0
    for name, node in stubbed.items():
        if isinstance(node, ast.FunctionDef):
            assert runtime_names(getattr(pl, name), name) == stub_names(node), name
            checked += 1
            continue
        cls = getattr(pl, name)
        for fn in node.body:
            if not isinstance(fn, ast.FunctionDef) or any(getattr(d, "id", "") == "property" for d in fn.decorator_list):
                continue
            if isinstance(cls, type) and issubclass(cls, BaseException):
                continue
            if fn.name in ("__int__", "__index__"):  # the enum's
                continue
            assert runtime_names(getattr(cls, fn.name), fn.name) == stub_names(fn), f"{name}.{fn.name}"
            checked += 1
    assert checked > 50


def test_logs_reach_sys_stderr(portable_lib, capsys):
    """Runtime logs go through Python's sys.stderr (captured here), not straight to fd 2."""
    portable_lib._load_for_executorch(str(FIXTURES / "add.pte"), debug_buffer_size=1024)  # no enable_etdump
    err = capsys.readouterr().err
    assert "[etrt] info: debug_buffer_size=1024 has no effect without enable_etdump=True" in err


def test_extension_links_no_torch():
    import shutil
    import subprocess
    import executorch_portable_lib._C as ext
    if not shutil.which("ldd"):
        pytest.skip("ldd not available")
    deps = subprocess.run(["ldd", ext.__file__], capture_output=True, text=True, check=True).stdout
    assert "libtorch" not in deps and "libc10" not in deps, deps


def test_only_unplanned_writable_inputs_see_in_place_updates(portable_lib):
    """Default planning copies every input; alloc_graph_input=False reads a writable input in place."""
    unplanned = portable_lib._load_for_executorch(str(FIXTURES / "inplace_input_unplanned.pte"))
    planned = portable_lib._load_for_executorch(str(FIXTURES / "inplace_input_planned.pte"))
    assert not unplanned.method_meta("forward").input_tensor_meta(0).is_memory_planned()
    assert planned.method_meta("forward").input_tensor_meta(0).is_memory_planned()
    x = np.full(4, 10, np.float32)
    outs = unplanned.forward([x])
    np.testing.assert_array_equal(x, np.full(4, 11))  # the method's own x.add_(1) reached the caller's array
    np.testing.assert_array_equal(to_numpy(outs[1]), np.full(4, 22))
    y = np.full(4, 10, np.float32)
    outs = planned.forward([y])
    np.testing.assert_array_equal(y, np.full(4, 10))  # planned: the method worked on its own copy
    np.testing.assert_array_equal(to_numpy(outs[1]), np.full(4, 22))
    ro = np.full(4, 10, np.float32)
    ro.setflags(write=False)
    unplanned.forward([ro])
    np.testing.assert_array_equal(ro, np.full(4, 10))  # read-only buffers are copied, never written


def test_unplanned_torch_input_updated_in_place(portable_lib):
    try:
        import torch
    except ImportError:
        pytest.skip("torch not installed or blocked")
    m = portable_lib._load_for_executorch(str(FIXTURES / "inplace_input_unplanned.pte"))
    t = torch.zeros(4)
    m.forward([t])
    assert t.tolist() == [1.0] * 4


def test_constant_output_is_read_only(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "constant_output.pte"))
    assert m.method_meta("forward").output_tensor_meta(1).is_memory_planned()  # constants count as planned
    x = np.ones((2, 3), np.float32)
    borrowed = m.forward([x], clone_outputs=False)
    cloned = m.forward([x])
    np.testing.assert_array_equal(to_numpy(borrowed[1]), to_numpy(cloned[1]))
    if portable_lib._output_mode == "torch":
        import torch
        c = borrowed[1]
        assert isinstance(c, torch.Tensor)
        c += 1  # a copy: torch tensors cannot be read-only
        np.testing.assert_array_equal(to_numpy(m.forward([x], clone_outputs=False)[1]), to_numpy(cloned[1]))
        return
    view = np.asarray(borrowed[1])
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0, 0] = 5
    copied = np.from_dlpack(borrowed[1])  # DLPack copies a read-only result by default
    assert copied.ctypes.data != view.ctypes.data
    shared = np.from_dlpack(borrowed[1], copy=False)  # DLPack 1.0 without a copy: marked read-only
    assert shared.ctypes.data == view.ctypes.data and not shared.flags.writeable
    assert np.asarray(cloned[1]).flags.writeable


def run_python(code, **env):
    import os
    import subprocess
    import sys
    full_env = dict(os.environ)
    full_env.pop("ETRT_TEST_BLOCK_TORCH", None)
    full_env.pop("EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT", None)
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env,
                          cwd=str(ROOT / "tests" / "python"))


def test_output_mode_env_is_read_once_at_load():
    code = ("import os\n"
            "from executorch.extension.pybindings import portable_lib as pl\n"
            "os.environ['EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT'] = 'torch'\n"
            "import importlib; importlib.reload(pl)\n"
            "print(pl._output_mode)\n")
    r = run_python(code, EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT="executorch")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "executorch"


def test_selecting_torch_without_torch_raises():
    code = ("import sys\n"
            "sys.modules['torch'] = None\n"
            "from executorch.extension.pybindings import portable_lib\n")
    r = run_python(code, EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT="torch")
    assert r.returncode != 0
    assert "EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=torch but torch cannot be imported" in r.stderr
    r = run_python(code.replace("import portable_lib", "import portable_lib as pl; print(pl._output_mode)"))
    assert r.returncode == 0 and r.stdout.strip() == "executorch"  # without the setting: falls back


def test_program_with_data_path(portable_lib, corpus):
    prog = portable_lib._load_program(str(corpus / "xor.pte"), data_path=str(corpus / "xor.ptd"))
    method = prog.load_method("forward")
    outs = method.call([np.array([[1, 0]], np.float32), np.array([1], np.int64)])
    assert abs(float(to_numpy(outs[0])) - 0.683540) < 1e-5
    with pytest.raises(RuntimeError, match="external data"):
        portable_lib._load_program(str(corpus / "xor.pte")).load_method("forward")


def test_thread_count_setting_keeps_results(portable_lib):
    before = portable_lib._threadpool_get_thread_count()
    assert before >= 1
    m = portable_lib._load_for_executorch(str(FIXTURES / "cnn_zoo.pte"))
    x = np.load(FIXTURES / "cnn_zoo.npz")["in0"]
    try:
        portable_lib._unsafe_reset_threadpool(1)
        one = to_numpy(m.forward([x])[0])
        portable_lib._unsafe_reset_threadpool(3)
        assert portable_lib._threadpool_get_thread_count() == 3
        three = to_numpy(m.forward([x])[0])
        np.testing.assert_allclose(one, three, rtol=1e-5, atol=1e-6)
        with pytest.raises(RuntimeError, match="at least 1"):
            portable_lib._unsafe_reset_threadpool(0)
    finally:
        portable_lib._unsafe_reset_threadpool(before)
