"""CUDA programs and inputs without the test hook: mostly bindings built without CUDA (the normal CPU build).

Loading a CUDA fixture's method fails with an error naming the backend, the device and the CUDA-enabled build; the
metadata still reads without loading the method; from_host raises; CPU calls never wait for a device; a CUDA DLPack
input reaches Method::set_input, which reports the device mismatch.
"""
import ctypes
import json
import pathlib

import numpy as np
import pytest

from conftest import FIXTURES

CUDA_FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "cuda"


@pytest.fixture(scope="module")
def pl(portable_lib):
    return portable_lib


@pytest.fixture(scope="module")
def cpu_build(portable_lib):
    """For the checks of a build without CUDA (the others hold in a CUDA-enabled build too)."""
    if portable_lib._cuda_enabled():
        pytest.skip("these bindings are built with CUDA")
    return portable_lib


@pytest.fixture(scope="module")
def cuda_manifest():
    path = CUDA_FIXTURES / "manifest.json"
    if not path.exists():
        pytest.skip(f"CUDA fixtures not found in {CUDA_FIXTURES} (made by tools/export/export_cuda_fixtures.py)")
    return json.loads(path.read_text())


def fixture_names(manifest):
    names = [f["name"] for f in manifest["fixtures"] if (CUDA_FIXTURES / f["files"]["pte"]).exists()]
    if not names:
        pytest.skip("no CUDA fixture .pte files")
    return names


def test_no_backend_registered(cpu_build):
    pl = cpu_build
    assert pl._get_registered_backend_names() == ["XnnpackBackend"]  # every build registers the XNNPACK delegate
    assert not pl._is_available("EtrtCudaBackend")
    assert pl._cuda_enabled() is False


def test_loading_a_cuda_method_fails_clearly(cpu_build, cuda_manifest):
    pl = cpu_build
    for entry in cuda_manifest["fixtures"]:
        path = str(CUDA_FIXTURES / entry["files"]["pte"])
        if not pathlib.Path(path).exists():
            continue
        module = pl._load_for_executorch(path)  # the program loads; its methods need CUDA
        meta = module.method_meta("forward")
        inputs = [np.zeros(meta.input_tensor_meta(i).sizes(), np.float32) for i in range(meta.num_inputs())]
        for load in (lambda: module.forward(inputs), lambda: pl._load_program(path).load_method("forward")):
            with pytest.raises(RuntimeError) as e:
                load()
            msg = str(e.value)
            for fragment in ("EtrtCudaBackend", "cuda:0", "CUDA-enabled"):
                assert fragment in msg, (entry["name"], msg)


def test_metadata_reads_devices_without_loading(pl, cuda_manifest):
    for entry in cuda_manifest["fixtures"]:
        path = str(CUDA_FIXTURES / entry["files"]["pte"])
        if not pathlib.Path(path).exists():
            continue
        for meta in (pl._load_program(path).method_meta("forward"),
                     pl._load_for_executorch(path).method_meta("forward")):
            assert meta.backends() and set(meta.backends()) == {"EtrtCudaBackend"}
            for i, t in enumerate(entry["inputs"]):
                info = meta.input_tensor_meta(i)
                assert info.device() == t["device"], (entry["name"], i)
                assert info.is_memory_planned() == t["memory_planned"]
                assert list(info.dim_order()) == t["dim_order"]
            for i, t in enumerate(entry["outputs"]):
                assert meta.output_tensor_meta(i).device() == t["device"], (entry["name"], i)
                assert meta.output_tensor_meta(i).is_memory_planned() == t["memory_planned"]
    # Device inputs read "cuda:0"
    meta = pl._load_program(str(CUDA_FIXTURES / "cuda_mlp_device_io.pte")).method_meta("forward")
    assert meta.input_tensor_meta(0).device() == "cuda:0" and meta.output_tensor_meta(0).device() == "cuda:0"


def test_from_host_raises(cpu_build):
    pl = cpu_build
    for index in (0, 1):
        with pytest.raises(RuntimeError) as e:
            pl.ExecuTorchResult.from_host(np.ones(3, np.float32), device_index=index)
        assert f"cuda:{index}" in str(e.value) and "CUDA-enabled" in str(e.value)


def test_cpu_calls_never_wait(pl):
    w = pl._device_wait_count()
    module = pl._load_for_executorch(str(FIXTURES / "add.pte"))
    ones = np.ones((2, 3), np.float32)
    for clone in (True, False):
        out = module.forward([ones, ones], clone_outputs=clone)[0]
        if hasattr(out, "to_host"):
            out.to_host()
            out.__dlpack__()
            out.__dlpack__(stream=None, max_version=(1, 0))
    method = pl._load_program(str(FIXTURES / "add.pte")).load_method("forward")
    method.set_inputs([ones, ones])
    method.execute()
    method.get_outputs()
    assert pl._device_wait_count() == w


def test_emulated_counters_need_the_hook(pl):
    with pytest.raises(RuntimeError, match="_testing_emulate_cuda was not called"):
        pl._testing_emulated_counters()


# ---- a CUDA-labelled DLPack capsule, made with ctypes ---------------------------------------------------------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]


def cuda_labelled_capsule(array, device_id=0, keep=None):
    """A legacy DLPack capsule that says its (host) memory is on cuda:device_id. Nothing reads the memory: the
    bindings refuse the input before they would."""
    shape = (ctypes.c_int64 * array.ndim)(*array.shape)
    managed = DLManagedTensor()
    managed.dl_tensor = DLTensor(array.ctypes.data, DLDevice(2, device_id), array.ndim, DLDataType(2, 32, 1),
                                 shape, None, 0)
    keep.extend([array, shape, managed])
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(managed), b"dltensor", None)


def test_cuda_input_reaches_the_core(pl):
    """No blanket refusal of CUDA inputs in the bindings: Method::set_input reports the device mismatch, before any
    wait (so no torch is needed for it)."""
    keep = []
    module = pl._load_for_executorch(str(FIXTURES / "add.pte"))
    ones = np.ones((2, 3), np.float32)
    w = pl._device_wait_count()
    with pytest.raises(RuntimeError) as e:
        module.forward([ones, cuda_labelled_capsule(ones.copy(), 0, keep)])
    assert "input 1 is on cuda:0, the method expects it on cpu" in str(e.value)

    class Producer:
        def __dlpack__(self, **kw):
            return cuda_labelled_capsule(ones.copy(), 3, keep)

        def __dlpack_device__(self):
            return (2, 3)
    with pytest.raises(RuntimeError, match="input 0 is on cuda:3, the method expects it on cpu"):
        module.forward([Producer(), ones])
    assert pl._device_wait_count() == w
    np.testing.assert_array_equal(np.asarray(module.forward([ones, ones])[0]) if pl._output_mode != "torch"
                                  else module.forward([ones, ones])[0].numpy(), 2 * ones)
