"""The GPU suite of the portable bindings: CUDA inputs and outputs on a real device, through the CUDA delegate.

    python -m pytest tests/test_pybindings_cuda_dlpack.py

It checks torch CUDA and CuPy inputs (device index preserved), layouts (a torch CUDA tensor in another layout is
converted by torch, a CuPy one is refused), from_host/to_host, CUDA results passed back in, DLPack export and its
stream handling (stream=-1 skips the wait), the device waits of each call (Note [device waits] in
include/etrt/adapters/device_runtime.h, counted by _device_wait_count()), clone costs, output buffers taking turns,
zero-copy unplanned outputs (alloc_graph_output=False) and borrowed output lifetimes, on the real-exporter fixtures in
tests/fixtures/cuda. The current output mode runs in this process; the other one runs in a subprocess (when the
caller did not pick a mode with EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT), and two tests run in subprocesses without torch.

Without a GPU, CUDA-enabled bindings or the CUDA backend every test skips; with
EXECUTORCH_PYBIND_TEST_REQUIRE_CUDA=1 they fail instead. ETRT_CUDA_SUITE_EMULATE=1 runs the parts that need neither
torch nor CuPy on the bindings' host-emulated device (_testing_emulate_cuda), to check this file on a CPU machine.
"""
import gc
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "cuda"
REQUIRE = os.environ.get("EXECUTORCH_PYBIND_TEST_REQUIRE_CUDA") == "1"
EMULATE = os.environ.get("ETRT_CUDA_SUITE_EMULATE") == "1"
MODE_ENV = "EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT"

if EMULATE:
    os.environ[MODE_ENV] = "executorch"  # emulated CUDA results are host memory: never hand them to torch


def unavailable(reason):
    if REQUIRE:
        pytest.fail(f"{reason} (EXECUTORCH_PYBIND_TEST_REQUIRE_CUDA=1)", pytrace=False)
    pytest.skip(reason)


# ---- environment ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def pl():
    try:
        from executorch.extension.pybindings import portable_lib
    except ImportError as e:
        unavailable(f"the bindings do not import: {e}")
    if EMULATE:
        portable_lib._testing_emulate_cuda()
    elif not portable_lib._cuda_enabled():
        unavailable("these bindings are built without CUDA (install with ./install_executorch.sh --cuda)")
    if "EtrtCudaBackend" not in portable_lib._get_registered_backend_names():
        unavailable("the CUDA backend EtrtCudaBackend is not registered in these bindings")
    if not portable_lib._is_available("EtrtCudaBackend"):
        try:
            portable_lib.ExecuTorchResult.from_host(np.zeros(1, np.float32))
            why = "EtrtCudaBackend reports itself unavailable"
        except RuntimeError as e:
            why = str(e)
        unavailable(f"no usable GPU: {why}")
    if not (FIXTURES / "manifest.json").exists():
        unavailable(f"the CUDA fixtures are missing from {FIXTURES}")
    return portable_lib


@pytest.fixture(scope="session")
def torch_cuda(pl):
    if EMULATE:
        pytest.skip("emulated device: torch CUDA tensors need a GPU")
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not importable")
    if not torch.cuda.is_available():
        unavailable("torch cannot use the GPU (torch.cuda.is_available() is False)")
    return torch


@pytest.fixture(scope="session")
def cupy(pl):
    if EMULATE:
        pytest.skip("emulated device: CuPy arrays need a GPU")
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no GPU")
    except Exception as e:  # ImportError, or CUDA driver errors raised by CuPy
        pytest.skip(f"CuPy is not usable: {e}")
    return cp


def torch_mode(pl):
    return pl._output_mode == "torch"


# ---- fixtures and outputs -------------------------------------------------------------------------------------------

def manifest_entry(name):
    return next(f for f in json.loads((FIXTURES / "manifest.json").read_text())["fixtures"] if f["name"] == name)


def reference(name):
    return np.load(FIXTURES / f"{name}.npz")


def pte(name):
    return str(FIXTURES / f"{name}.pte")


def in_dim_order(x, dim_order):
    """`x` (logical values) laid out in memory in `dim_order`, with the same logical values."""
    dim_order = list(dim_order)
    return np.ascontiguousarray(x.transpose(dim_order)).transpose(np.argsort(dim_order))


def to_numpy(out):
    """An output (torch tensor or ExecuTorchResult, on any device) as a NumPy array."""
    if hasattr(out, "detach"):
        return out.detach().cpu().numpy()
    return np.asarray(out.to_host())


def data_ptr(out):
    return out.data_ptr() if hasattr(out, "data_ptr") else out._data_ptr()


def device_of(out):
    return str(out.device)


def check_outputs(name, outs, scale=1.0):
    ref = reference(name)
    tol = manifest_entry(name)["tolerance"]
    for i, o in enumerate(outs):
        # GPU kernels sum in another order than the NumPy reference; 10x the exporter's tolerance.
        np.testing.assert_allclose(to_numpy(o), ref[f"out{i}"] * scale, rtol=10 * tol["rtol"], atol=10 * tol["atol"],
                                   err_msg=f"{name} output {i}")


def host_inputs(meta, ref, scale=1.0):
    """The npz inputs, each in its input's exported layout."""
    return [in_dim_order(ref[f"in{i}"] * np.float32(scale), meta.input_tensor_meta(i).dim_order())
            for i in range(meta.num_inputs())]


def device_inputs(pl, meta, ref, make=None, scale=1.0):
    """Inputs for `meta`: CUDA ones made by `make` (default ExecuTorchResult.from_host), CPU ones as arrays."""
    make = make or (lambda x: pl.ExecuTorchResult.from_host(x))
    return [make(x) if meta.input_tensor_meta(i).device() != "cpu" else x
            for i, x in enumerate(host_inputs(meta, ref, scale))]


class Waits:
    def __init__(self, pl):
        self.pl = pl
        self.start = pl._device_wait_count()

    def __call__(self):
        return self.pl._device_wait_count() - self.start


ALL = ("cuda_add_default", "cuda_mlp_device_io", "cuda_mlp_unplanned_out", "cuda_channels_last",
       "cuda_transformer_block", "cuda_mixed", "cuda_encoder_layer")


# ---- tests: numpy and from_host (no torch or CuPy needed) -----------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
def test_fixture_outputs(pl, name):
    module = pl._load_for_executorch(pte(name))
    meta = module.method_meta("forward")
    entry = manifest_entry(name)
    for clone in (True, False):
        outs = module.forward(device_inputs(pl, meta, reference(name)), clone_outputs=clone)
        assert [device_of(o) for o in outs] == [t["device"] for t in entry["outputs"]]
        check_outputs(name, outs)


def test_from_host_to_host(pl):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    w = Waits(pl)
    r = pl.ExecuTorchResult.from_host(x, device_index=0)
    assert r.device == "cuda:0" and r.__dlpack_device__() == (2, 0) and r.shape == (2, 3, 4) and r.strides == x.strides
    assert "cuda:0" in repr(r) and w() == 0
    h = r.to_host()
    assert w() == 1 and h.device == "cpu"
    np.testing.assert_array_equal(np.asarray(h), x)
    t = x.transpose(2, 0, 1)  # dense, another dim order: kept
    rt = pl.ExecuTorchResult.from_host(t)
    assert rt.strides == t.strides
    np.testing.assert_array_equal(np.asarray(rt.to_host()), t)
    np.testing.assert_array_equal(np.from_dlpack(r, device="cpu"), x)  # dl_device=(1, 0): a copy to the host
    with pytest.raises(BufferError, match="copy=False"):
        r.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError):
        np.asarray(r)
    count = pl.ExecuTorchResult.from_host  # out-of-range index names the device and the count
    with pytest.raises(RuntimeError, match=r"cuda:64 is out of range: this machine has \d+ CUDA device"):
        count(x, device_index=64)


def test_dlpack_stream_minus_one_skips_the_wait(pl):
    r = pl.ExecuTorchResult.from_host(np.ones((2, 3), np.float32))
    w = Waits(pl)
    r.__dlpack__(stream=-1)
    r.__dlpack__(stream=-1, max_version=(1, 0))
    assert w() == 0
    r.__dlpack__()
    r.__dlpack__(stream=1, max_version=(1, 0))
    assert w() == 2


def test_call_waits(pl):
    """One wait per device before (non-empty CUDA input or output) and after; one more per cloned CUDA output."""
    ref = reference("cuda_mlp_device_io")
    module = pl._load_for_executorch(pte("cuda_mlp_device_io"))
    x = device_inputs(pl, module.method_meta("forward"), ref)
    module.forward(x)
    w = Waits(pl)
    module.forward(x, clone_outputs=False)
    assert w() == 2
    w = Waits(pl)
    module.forward(x)
    assert w() == 3
    w = Waits(pl)
    module_cpu = pl._load_for_executorch(pte("cuda_add_default"))  # CPU inputs and outputs: no wait
    module_cpu.forward(device_inputs(pl, module_cpu.method_meta("forward"), reference("cuda_add_default")))
    assert w() == 0


def test_clone_costs(pl):
    """clone_outputs=True on a planned CUDA output: new memory, a device-to-device copy, one wait; it survives later
    calls, while the borrowed view is overwritten."""
    name = "cuda_mlp_device_io"
    ref = reference(name)
    module = pl._load_for_executorch(pte(name))
    meta = module.method_meta("forward")
    assert meta.output_tensor_meta(0).is_memory_planned()
    x = device_inputs(pl, meta, ref)
    borrowed = module.forward(x, clone_outputs=False)[0]
    w = Waits(pl)
    cloned = module.forward(x)[0]
    assert w() == 3
    assert data_ptr(cloned) != data_ptr(borrowed) and device_of(cloned) == "cuda:0"
    check_outputs(name, [cloned])
    module.forward(device_inputs(pl, meta, ref, scale=2.0), clone_outputs=False)
    check_outputs(name, [cloned])  # unchanged
    assert not np.allclose(to_numpy(borrowed), ref["out0"], rtol=1e-3, atol=1e-4)  # overwritten


def test_unplanned_outputs_take_turns(pl):
    """alloc_graph_output=False: returned without a copy (no clone wait); a Method alternates two buffers."""
    name = "cuda_mlp_unplanned_out"
    method = pl._load_program(pte(name)).load_method("forward")
    assert not method.method_meta().output_tensor_meta(0).is_memory_planned()
    x = device_inputs(pl, method.method_meta(), reference(name))
    w = Waits(pl)
    r1 = method(x)[0]
    assert w() == 2
    r2 = method(x)[0]
    a, b = data_ptr(r1), data_ptr(r2)
    assert a != b
    check_outputs(name, [r1, ])
    check_outputs(name, [r2])
    del r1
    gc.collect()
    r3 = method(x)[0]
    assert data_ptr(r3) == a
    del r2
    gc.collect()
    r4 = method(x)[0]
    assert data_ptr(r4) == b
    r5 = method(x)[0]  # both held: new memory
    assert data_ptr(r5) not in (a, b)
    check_outputs(name, [r5])
    # A module allocates new memory each call.
    module = pl._load_for_executorch(pte(name))
    held = [module.forward(x)[0] for _ in range(3)]
    assert len({data_ptr(r) for r in held}) == 3


def test_borrowed_output_lifetimes(pl):
    for name in ("cuda_mlp_device_io", "cuda_mlp_unplanned_out"):
        module = pl._load_for_executorch(pte(name))
        x = device_inputs(pl, module.method_meta("forward"), reference(name))
        borrowed = module.forward(x, clone_outputs=False)[0]
        del module
        gc.collect()
        check_outputs(name, [borrowed])  # the view keeps the method's device memory alive


def test_results_passed_back_in(pl):
    """A CUDA output fed back in stays on the device and is read as a device input."""
    name = "cuda_transformer_block"
    module = pl._load_for_executorch(pte(name))
    x = device_inputs(pl, module.method_meta("forward"), reference(name))
    once = module.forward(x)[0]
    assert device_of(once) == "cuda:0"
    twice = module.forward([once])[0]
    via_host = module.forward([pl.ExecuTorchResult.from_host(to_numpy(once))])[0]
    np.testing.assert_allclose(to_numpy(twice), to_numpy(via_host), rtol=1e-5, atol=1e-6)
    borrowed = module.forward(x, clone_outputs=False)[0]
    np.testing.assert_allclose(to_numpy(module.forward([borrowed])[0]), to_numpy(via_host), rtol=1e-5, atol=1e-6)


def test_non_torch_layout_and_device_refusals(pl):
    """A non-torch CUDA input must be in the exported layout; devices must match."""
    ref = reference("cuda_channels_last")
    module = pl._load_for_executorch(pte("cuda_channels_last"))
    with pytest.raises(RuntimeError, match="exported dim order"):
        module.forward([pl.ExecuTorchResult.from_host(np.ascontiguousarray(ref["in0"]))])
    check_outputs("cuda_channels_last",
                  module.forward([pl.ExecuTorchResult.from_host(in_dim_order(ref["in0"], (0, 2, 3, 1)))]))
    mlp = pl._load_for_executorch(pte("cuda_mlp_device_io"))
    with pytest.raises(RuntimeError, match="is on cpu, the method expects it on cuda:0"):
        mlp.forward([reference("cuda_mlp_device_io")["in0"]])
    add = pl._load_for_executorch(pte("cuda_add_default"))
    with pytest.raises(RuntimeError, match="is on cuda:0, the method expects it on cpu"):
        add.forward([pl.ExecuTorchResult.from_host(np.ones((2, 3), np.float32)), np.ones((2, 3), np.float32)])


# ---- tests: torch CUDA tensors ---------------------------------------------------------------------------------------

def test_torch_cuda_inputs(pl, torch_cuda):
    torch = torch_cuda
    name = "cuda_mlp_device_io"
    module = pl._load_for_executorch(pte(name))
    x = torch.from_numpy(reference(name)["in0"]).to("cuda:0")
    w = Waits(pl)
    outs = module.forward([x])
    assert w() == 3
    check_outputs(name, outs)
    out = outs[0]
    if torch_mode(pl):
        assert isinstance(out, torch.Tensor) and out.device == torch.device("cuda", 0)
    else:
        assert out.device == "cuda:0"
        t = torch.from_dlpack(out)  # torch passes its stream: one wait
        assert t.device == torch.device("cuda", 0) and t.data_ptr() == out._data_ptr()
    # Borrowed outputs: torch reads the method's memory.
    borrowed = module.forward([x], clone_outputs=False)[0]
    check_outputs(name, [borrowed])
    # Device index: a tensor on another GPU is refused by name.
    if torch.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match="is on cuda:1, the method expects it on cuda:0"):
            module.forward([x.to("cuda:1")])
    with pytest.raises(RuntimeError, match="is on cpu, the method expects it on cuda:0"):
        module.forward([x.cpu()])


def test_torch_cuda_layouts_converted_by_torch(pl, torch_cuda):
    torch = torch_cuda
    name = "cuda_channels_last"
    module = pl._load_for_executorch(pte(name))
    x = torch.from_numpy(reference(name)["in0"]).to("cuda:0")  # contiguous; the method wants channels-last
    w = Waits(pl)
    outs = module.forward([x], clone_outputs=False)
    assert w() == 3  # one before torch converts it, one before, one after
    check_outputs(name, outs)
    cl = x.to(memory_format=torch.channels_last)  # already in the exported layout: no conversion
    w = Waits(pl)
    check_outputs(name, module.forward([cl], clone_outputs=False))
    assert w() == 2
    # A transposed (dense) tensor for a contiguous method.
    mlp = pl._load_for_executorch(pte("cuda_mlp_device_io"))
    xt = torch.from_numpy(np.ascontiguousarray(reference("cuda_mlp_device_io")["in0"].T)).to("cuda:0").t()
    check_outputs("cuda_mlp_device_io", mlp.forward([xt]))


def test_torch_results_back_in_and_clone(pl, torch_cuda):
    torch = torch_cuda
    name = "cuda_transformer_block"
    module = pl._load_for_executorch(pte(name))
    x = torch.from_numpy(reference(name)["in0"]).to("cuda:0")
    out = module.forward([x])[0]
    again = module.forward([out])[0]
    expected = module.forward([torch.from_numpy(to_numpy(out)).to("cuda:0")])[0]
    np.testing.assert_allclose(to_numpy(again), to_numpy(expected), rtol=1e-5, atol=1e-6)
    if torch_mode(pl):
        borrowed = module.forward([x], clone_outputs=False)[0]
        normal = borrowed.clone()  # a normal torch tensor
        assert normal.device.type == "cuda" and normal.data_ptr() != borrowed.data_ptr()


# ---- tests: CuPy arrays --------------------------------------------------------------------------------------------

def test_cupy_inputs_and_outputs(pl, cupy):
    cp = cupy
    name = "cuda_mlp_device_io"
    module = pl._load_for_executorch(pte(name))
    x = cp.asarray(reference(name)["in0"])
    w = Waits(pl)
    outs = module.forward([x])
    assert w() == 3
    check_outputs(name, outs)
    y = cp.from_dlpack(outs[0])  # zero copy, on the same device
    assert int(y.data.ptr) == data_ptr(outs[0]) and y.device.id == 0
    np.testing.assert_allclose(cp.asnumpy(y), to_numpy(outs[0]))
    # A CuPy array in another layout is refused: only torch converts device memory.
    cl = pl._load_for_executorch(pte("cuda_channels_last"))
    ref = reference("cuda_channels_last")
    with pytest.raises(RuntimeError, match="exported dim order"):
        cl.forward([cp.asarray(ref["in0"])])
    good = cp.ascontiguousarray(cp.asarray(ref["in0"]).transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    check_outputs("cuda_channels_last", cl.forward([good]))
    # Capsules and stream=-1.
    r = pl.ExecuTorchResult.from_host(reference(name)["in0"])
    w = Waits(pl)
    cp.from_dlpack(r)
    assert w() == 1
    check_outputs(name, module.forward([x.__dlpack__()]))


# ---- both output modes, and no torch ---------------------------------------------------------------------------------

def _child_env(**extra):
    import importlib.util
    spec = importlib.util.find_spec("executorch_portable_lib")
    root = str(pathlib.Path(spec.origin).parents[1])
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def test_other_output_mode(pl):
    """This suite in the output mode this process does not use, when the caller did not choose one."""
    if EMULATE or os.environ.get(MODE_ENV):
        pytest.skip(f"{MODE_ENV} was set by the caller, who runs each mode separately")
    other = "executorch" if torch_mode(pl) else "torch"
    if other == "torch":
        pytest.skip("torch is not importable, so torch output mode cannot run")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", __file__],
                          cwd=str(pathlib.Path(__file__).parent), env=_child_env(**{MODE_ENV: other}),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{MODE_ENV}={other}:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    assert " passed" in proc.stdout


NO_TORCH_PRELUDE = """
import os, sys
sys.modules["torch"] = None  # no torch in this process
import numpy as np
from executorch.extension.pybindings import portable_lib as pl
if os.environ.get("ETRT_CUDA_SUITE_EMULATE") == "1":
    pl._testing_emulate_cuda()
assert pl._output_mode == "executorch"
F = {fixtures!r}
def load(name):
    return pl._load_for_executorch(os.path.join(F, name + ".pte")), np.load(os.path.join(F, name + ".npz"))
"""


def run_without_torch(body):
    code = NO_TORCH_PRELUDE.format(fixtures=str(FIXTURES)) + textwrap.dedent(body)
    env = _child_env()
    env.pop(MODE_ENV, None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_without_torch_numpy(pl):
    """CUDA-enabled bindings need no torch: NumPy in, from_host/to_host, clone and take-turns."""
    out = run_without_torch("""
        m, d = load("cuda_mlp_device_io")
        x = pl.ExecuTorchResult.from_host(d["in0"])
        w = pl._device_wait_count()
        r = m.forward([x])[0]
        assert pl._device_wait_count() - w == 3 and r.device == "cuda:0"
        np.testing.assert_allclose(np.asarray(r.to_host()), d["out0"], rtol=1e-3, atol=1e-4)
        d2 = np.load(os.path.join(F, "cuda_mlp_unplanned_out.npz"))
        method = pl._load_program(os.path.join(F, "cuda_mlp_unplanned_out.pte")).load_method("forward")
        x2 = pl.ExecuTorchResult.from_host(d2["in0"])
        a = method([x2])[0]
        b = method([x2])[0]
        assert a._data_ptr() != b._data_ptr()
        np.testing.assert_allclose(np.from_dlpack(b, device="cpu"), d2["out0"], rtol=1e-3, atol=1e-4)
        m2, d3 = load("cuda_mixed")
        outs = m2.forward([d3["in0"]])
        for i, o in enumerate(outs):
            np.testing.assert_allclose(np.asarray(o), d3[f"out{i}"], rtol=1e-3, atol=1e-4)
        print("ok")
    """)
    assert "ok" in out


def test_without_torch_cupy(pl, cupy):
    """CuPy inputs and outputs with no torch in the process."""
    out = run_without_torch("""
        import cupy as cp
        m, d = load("cuda_transformer_block")
        r = m.forward([cp.asarray(d["in0"])])[0]
        y = cp.from_dlpack(r)
        assert int(y.data.ptr) == r._data_ptr()
        np.testing.assert_allclose(cp.asnumpy(y), d["out0"], rtol=1e-3, atol=1e-4)
        again = m.forward([y])[0]  # a CuPy view of our result, back in
        assert again.device == "cuda:0"
        print("ok")
    """)
    assert "ok" in out
