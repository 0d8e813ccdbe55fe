"""CUDA rules of the bindings on an emulated device (no GPU needed).

`_testing_emulate_cuda()` makes CUDA memory host memory labelled cuda:N and registers the CUDA delegate with host
kernels, so every device rule runs through the real Python API on the real-exporter fixtures in tests/fixtures/cuda:
outputs, the device waits (Note [device waits] in include/etrt/adapters/device_runtime.h, counted by
`_device_wait_count()`), clone costs, output buffers taking turns, from_host/to_host, DLPack device and stream
handling, layout and device refusals.

The hook cannot be undone, so each scenario runs in its own process: this file is also a script,
`python test_device_emulated.py SCENARIO DEVICE_COUNT`, which installs the hook (in ExecuTorchResult output mode) and
runs one scenario function. The pytest tests below only launch those processes.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
CUDA_FIXTURES = ROOT / "tests" / "fixtures" / "cuda"

SCENARIOS = {}


def scenario(*fixtures, device_count=1, hook=True):
    """Registers a scenario that needs `fixtures` (names in tests/fixtures/cuda) and runs in its own process."""
    def register(fn):
        SCENARIOS[fn.__name__] = dict(fn=fn, fixtures=fixtures, device_count=device_count, hook=hook)
        return fn
    return register


# ---- helpers used inside the scenario processes -------------------------------------------------------------------

def manifest_entry(name):
    fixtures = json.loads((CUDA_FIXTURES / "manifest.json").read_text())["fixtures"]
    return next(f for f in fixtures if f["name"] == name)


def reference(name):
    return np.load(CUDA_FIXTURES / f"{name}.npz")


def pte(name):
    return str(CUDA_FIXTURES / f"{name}.pte")


def in_dim_order(x, dim_order):
    """`x` (logical values) laid out in memory in `dim_order`, as a NumPy view with the same logical values."""
    dim_order = list(dim_order)
    return np.ascontiguousarray(x.transpose(dim_order)).transpose(np.argsort(dim_order))


def method_inputs(pl, meta, ref, device_index=0):
    """The npz inputs in each input's exported layout: from_host copies for CUDA inputs, arrays for CPU ones."""
    out = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        x = in_dim_order(ref[f"in{i}"], info.dim_order())
        out.append(pl.ExecuTorchResult.from_host(x, device_index=device_index) if info.device() != "cpu" else x)
    return out


def host(r):
    return np.asarray(r.to_host())


def check_outputs(name, outs):
    ref = reference(name)
    tol = manifest_entry(name)["tolerance"]
    for i, o in enumerate(outs):
        np.testing.assert_allclose(host(o), ref[f"out{i}"], rtol=tol["rtol"], atol=tol["atol"],
                                   err_msg=f"{name} output {i}")


class Counts:
    """Deltas of the bindings' wait counter and the emulated device's counters since construction (or reset)."""

    def __init__(self, pl):
        self.pl = pl
        self.reset()

    def reset(self):
        self.waits0 = self.pl._device_wait_count()
        self.dev0 = self.pl._testing_emulated_counters()

    @property
    def waits(self):
        return self.pl._device_wait_count() - self.waits0

    def __getitem__(self, key):
        return self.pl._testing_emulated_counters()[key] - self.dev0[key]


def raises(exc, *fragments):
    """A context manager asserting `exc` is raised with every fragment in its message."""
    class _Raises:
        def __enter__(self):
            return self

        def __exit__(self, et, ev, tb):
            assert et is not None, f"expected {exc.__name__}"
            assert issubclass(et, exc), f"expected {exc.__name__}, got {et.__name__}: {ev}"
            for f in fragments:
                assert f in str(ev), f"{f!r} not in {str(ev)!r}"
            self.message = str(ev)
            return True
    return _Raises()


# ---- scenarios ----------------------------------------------------------------------------------------------------

ALL = ("cuda_add_default", "cuda_mlp_device_io", "cuda_mlp_unplanned_out", "cuda_channels_last",
       "cuda_transformer_block", "cuda_mixed", "cuda_encoder_layer")


@scenario(*ALL)
def outputs_match_reference(pl):
    assert pl._get_registered_backend_names() == ["XnnpackBackend", "EtrtCudaBackend"]
    assert pl._is_available("EtrtCudaBackend") and pl._is_available("XnnpackBackend")
    assert not pl._is_available("VulkanBackend")  # not registered in this build
    for name in ALL:
        entry = manifest_entry(name)
        ref = reference(name)
        # Module, both output modes of clone_outputs
        module = pl._load_for_executorch(pte(name))
        meta = module.method_meta("forward")
        for i, t in enumerate(entry["inputs"]):
            assert meta.input_tensor_meta(i).device() == t["device"]
            assert meta.input_tensor_meta(i).is_memory_planned() == t["memory_planned"]
        for i, t in enumerate(entry["outputs"]):
            assert meta.output_tensor_meta(i).device() == t["device"]
        for clone in (True, False):
            outs = module.forward(method_inputs(pl, meta, ref), clone_outputs=clone)
            assert [o.device for o in outs] == [t["device"] for t in entry["outputs"]]
            check_outputs(name, outs)
        # Program / Method API, split calls
        method = pl._load_program(pte(name)).load_method("forward")
        method.set_inputs(method_inputs(pl, meta, ref))
        method.execute()
        check_outputs(name, method.get_outputs())


@scenario("cuda_mlp_device_io", "cuda_add_default", "cuda_mixed")
def wait_rules(pl):
    ref = reference("cuda_mlp_device_io")
    module = pl._load_for_executorch(pte("cuda_mlp_device_io"))
    x = pl.ExecuTorchResult.from_host(ref["in0"])
    c = Counts(pl)
    assert c.waits == 0  # from_host does not wait
    # Borrowed outputs: one wait before (device of the input and output), one after.
    borrowed = module.forward([x], clone_outputs=False)
    assert c.waits == 2, c.waits
    # Cloned planned CUDA output: one more for its copy.
    c.reset()
    cloned = module.forward([x])
    assert c.waits == 3, c.waits
    # Reading a CUDA result: one wait per __dlpack__ (none for stream=-1) and per to_host().
    c.reset()
    r = cloned[0]
    r.__dlpack__()
    assert c.waits == 1
    r.__dlpack__(stream=-1)
    assert c.waits == 1
    r.__dlpack__(stream=1, max_version=(1, 0))
    assert c.waits == 2
    r.__dlpack__(stream=None, dl_device=(2, 0))
    assert c.waits == 3
    r.to_host()
    assert c.waits == 4
    np.from_dlpack(r, device="cpu")  # dl_device=(1, 0): one wait, then a device-to-host copy
    assert c.waits == 5
    borrowed[0].to_host()
    assert c.waits == 6
    r.__dlpack_device__()
    r.shape, r.device, repr(r)
    assert c.waits == 6
    # The split API: set_inputs waits for the inputs' devices before binding them; execute waits before and after.
    method = pl._load_program(pte("cuda_mlp_device_io")).load_method("forward")
    c.reset()
    method.set_inputs([x])
    assert c.waits == 1
    method.execute()
    assert c.waits == 3
    method.get_outputs(clone_outputs=False)
    assert c.waits == 3
    method.get_outputs()  # clones: one wait each
    assert c.waits == 4
    method.get_outputs()  # the same objects again within one execution: no copy
    assert c.waits == 4
    # Methods whose inputs and outputs are on the CPU never wait, even when they run on the device inside.
    for name in ("cuda_add_default", "cuda_mixed"):
        m = pl._load_for_executorch(pte(name))
        c.reset()
        for clone in (True, False):
            outs = m.forward(method_inputs(pl, m.method_meta("forward"), reference(name)), clone_outputs=clone)
            for o in outs:
                o.to_host()
                o.__dlpack__()
        assert c.waits == 0, (name, c.waits)
    # CPU programs never wait.
    cpu = pl._load_for_executorch(str(ROOT / "tests" / "fixtures" / "exported" / "add.pte"))
    c.reset()
    ones = np.ones((2, 3), np.float32)
    cpu.forward([ones, ones])[0].__dlpack__()
    assert c.waits == 0


@scenario("cuda_mlp_device_io", "cuda_channels_last")
def clone_costs(pl):
    """A planned CUDA output read with clone_outputs=True: one allocation, one device-to-device copy, one wait."""
    for name in ("cuda_mlp_device_io", "cuda_channels_last"):
        ref = reference(name)
        module = pl._load_for_executorch(pte(name))
        meta = module.method_meta("forward")
        assert meta.output_tensor_meta(0).is_memory_planned()
        inputs = method_inputs(pl, meta, ref)
        module.forward(inputs, clone_outputs=False)  # loads the method first
        c = Counts(pl)
        borrowed = module.forward(inputs, clone_outputs=False)[0]
        assert (c["allocations"], c["device_to_device"], c.waits) == (0, 0, 2)
        c.reset()
        cloned = module.forward(inputs)[0]
        assert (c["allocations"], c["device_to_device"], c.waits) == (1, 1, 3), (c["allocations"], c.waits)
        assert c["host_to_device"] == 0 and c["device_to_host"] == 0
        assert cloned._data_ptr() != borrowed._data_ptr()
        assert cloned.device == "cuda:0" and cloned.shape == borrowed.shape and cloned.strides == borrowed.strides
        # The clone keeps its value when later calls overwrite the method's memory; the borrowed view does not own.
        before = host(cloned).copy()
        x2 = in_dim_order(ref["in0"] * 2, meta.input_tensor_meta(0).dim_order())
        module.forward([pl.ExecuTorchResult.from_host(x2)], clone_outputs=False)
        np.testing.assert_array_equal(host(cloned), before)
        assert not np.array_equal(host(borrowed), before)
        # The clone's memory is released with the result.
        live = pl._testing_emulated_counters()["live_allocations"]
        del cloned
        assert pl._testing_emulated_counters()["live_allocations"] == live - 1
        if name == "cuda_channels_last":  # the clone keeps the output's dim order
            out = module.forward([pl.ExecuTorchResult.from_host(in_dim_order(ref["in0"], (0, 2, 3, 1)))])[0]
            assert out.strides == tuple(4 * s for s in (192, 1, 24, 3)), out.strides


@scenario("cuda_mlp_device_io")
def clone_same_objects_within_one_execution(pl):
    ref = reference("cuda_mlp_device_io")
    method = pl._load_program(pte("cuda_mlp_device_io")).load_method("forward")
    method.set_inputs([pl.ExecuTorchResult.from_host(ref["in0"])])
    method.execute()
    c = Counts(pl)
    a = method.get_outputs()[0]
    b = method.get_outputs()[0]
    assert a is b and c["allocations"] == 1 and c["device_to_device"] == 1
    borrowed1 = method.get_outputs(clone_outputs=False)[0]
    borrowed2 = method.get_outputs(clone_outputs=False)[0]
    assert borrowed1 is not borrowed2 and borrowed1._data_ptr() == borrowed2._data_ptr() != a._data_ptr()


@scenario("cuda_mlp_unplanned_out", "cuda_transformer_block")
def unplanned_outputs_take_turns(pl):
    """alloc_graph_output=False: the bindings allocate the output; clone_outputs=True returns it without a copy, and a
    Method writes its next execution into a second buffer, reusing one that no result holds."""
    for name in ("cuda_mlp_unplanned_out", "cuda_transformer_block"):
        ref = reference(name)
        method = pl._load_program(pte(name)).load_method("forward")
        meta = method.method_meta()
        assert not meta.output_tensor_meta(0).is_memory_planned()
        x = method_inputs(pl, meta, ref)
        c = Counts(pl)
        r1 = method(x)[0]
        assert (c["allocations"], c["device_to_device"], c.waits) == (1, 0, 2)  # no copy, no clone wait
        check_outputs(name, [r1])
        r2 = method(x)[0]
        assert r2._data_ptr() != r1._data_ptr() and c["allocations"] == 2
        a, b = r1._data_ptr(), r2._data_ptr()
        del r1  # buffer A is free again: the next execution takes it
        r3 = method(x)[0]
        assert r3._data_ptr() == a and c["allocations"] == 2
        del r2
        r4 = method(x)[0]
        assert r4._data_ptr() == b and c["allocations"] == 2
        # Both buffers held: new memory.
        r5 = method(x)[0]
        assert r5._data_ptr() not in (a, b) and c["allocations"] == 3
        for r in (r3, r4, r5):
            check_outputs(name, [r])
        assert c["device_to_device"] == 0
        # Nobody holds the results: the method keeps writing one buffer.
        del r3, r4, r5
        p = method(x)[0]._data_ptr()
        assert method(x)[0]._data_ptr() == p
        # A borrowed view holds its buffer too, so the next execution does not overwrite it.
        borrowed = method(x, clone_outputs=False)[0]
        nxt = method(x)[0]
        assert nxt._data_ptr() != borrowed._data_ptr()
        check_outputs(name, [borrowed])


@scenario("cuda_mlp_unplanned_out")
def module_allocates_each_call(pl):
    ref = reference("cuda_mlp_unplanned_out")
    module = pl._load_for_executorch(pte("cuda_mlp_unplanned_out"))
    x = method_inputs(pl, module.method_meta("forward"), ref)
    module.forward(x)  # loads the method
    live = pl._testing_emulated_counters()["live_allocations"]
    c = Counts(pl)
    for k in range(1, 4):
        module.forward(x)  # results dropped at once: a module still allocates new memory each call
        assert c["allocations"] == k and c["device_to_device"] == 0
    assert pl._testing_emulated_counters()["live_allocations"] <= live + 1
    held = [module.forward(x)[0] for _ in range(3)]
    assert len({r._data_ptr() for r in held}) == 3
    check_outputs("cuda_mlp_unplanned_out", held[:1])


@scenario("cuda_mlp_device_io", "cuda_mlp_unplanned_out", "cuda_transformer_block")
def borrowed_output_lifetimes(pl):
    import gc
    for name in ("cuda_mlp_device_io", "cuda_mlp_unplanned_out"):
        ref = reference(name)
        module = pl._load_for_executorch(pte(name))
        x = method_inputs(pl, module.method_meta("forward"), ref)
        borrowed = module.forward(x, clone_outputs=False)[0]
        del module, x
        gc.collect()
        check_outputs(name, [borrowed])  # the view keeps the method's memory alive
    # An exported capsule keeps the memory alive too, after the result and the module are gone.
    name = "cuda_transformer_block"
    module = pl._load_for_executorch(pte(name))
    x = method_inputs(pl, module.method_meta("forward"), reference(name))
    borrowed = module.forward(x, clone_outputs=False)[0]
    expected = host(borrowed).copy()
    capsule = borrowed.__dlpack__(max_version=(1, 0))
    live = pl._testing_emulated_counters()["live_allocations"]
    del module, borrowed
    gc.collect()
    assert pl._testing_emulated_counters()["live_allocations"] == live  # still held by the capsule
    other = pl._load_for_executorch(pte(name))
    np.testing.assert_array_equal(host(other.forward([capsule])[0]),
                                  host(other.forward([pl.ExecuTorchResult.from_host(expected)])[0]))


@scenario()
def from_host_and_to_host(pl):
    c = Counts(pl)
    for dtype in (np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_, np.float16, np.complex64):
        x = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
        r = pl.ExecuTorchResult.from_host(x)
        assert r.device == "cuda:0" and r.shape == (2, 3, 4) and r.__dlpack_device__() == (2, 0)
        assert r.strides == x.strides and "device='cuda:0'" in repr(r)
        h = r.to_host()
        assert h.device == "cpu" and h.__dlpack_device__() == (1, 0)
        np.testing.assert_array_equal(np.asarray(h), x)
    assert c.waits == 8 and c["host_to_device"] == 8 and c["device_to_host"] == 8 and c["allocations"] == 8
    # Layouts: a dense permuted array keeps its dim order (contiguous in its own dim order); a CPU result's to_host()
    # is the same memory.
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 0, 1)
    r = pl.ExecuTorchResult.from_host(x)
    assert r.shape == (4, 2, 3) and r.strides == x.strides
    np.testing.assert_array_equal(host(r), x)
    odd = np.ones((4, 1, 3), np.float32).transpose(1, 0, 2)  # a size-1 dim with an arbitrary stride
    assert pl.ExecuTorchResult.from_host(odd).strides == (48, 12, 4)
    h = r.to_host()
    assert h.to_host()._data_ptr() == h._data_ptr()
    # Other CPU producers: a DLPack capsule, a DLPack producer, a CPU result, bfloat16 stays bfloat16.
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    for src, expected in ((v.__dlpack__(), v), (v.__dlpack__(max_version=(1, 0)), v), (h, np.asarray(h)),
                          (memoryview(v), v), (v.T, v.T)):
        r = pl.ExecuTorchResult.from_host(src)
        assert r.device == "cuda:0"
        np.testing.assert_array_equal(host(r), expected)
    empty = pl.ExecuTorchResult.from_host(np.zeros((0, 3), np.float32))
    assert empty.shape == (0, 3) and host(empty).shape == (0, 3)
    # The buffer protocol is refused on CUDA (pybind11 raises "Error getting buffer" from our BufferError), and NumPy
    # does not fall back to an object array.
    try:
        memoryview(r)
    except BufferError as e:
        assert "CUDA" in str(e.__cause__ or e) and "to_host" in str(e.__cause__ or e), repr(e.__cause__)
    else:
        raise AssertionError("memoryview of a CUDA result")
    for read in (np.asarray, np.array, lambda x: x.numpy()):
        with raises(BufferError, "cuda:0", "to_host()"):
            read(r)
    np.testing.assert_array_equal(np.asarray(h, dtype=np.float64), np.asarray(h))
    # Refusals name the device and the reason.
    with raises(RuntimeError, "cuda:1", "out of range", "1 CUDA device"):
        pl.ExecuTorchResult.from_host(v, device_index=1)
    with raises(RuntimeError, "cuda:-1"):
        pl.ExecuTorchResult.from_host(v, device_index=-1)
    with raises(RuntimeError, "host memory", "cuda:0"):
        pl.ExecuTorchResult.from_host(r)
    with raises(TypeError, "CPU tensor"):
        pl.ExecuTorchResult.from_host(3)
    with raises(RuntimeError, "not dense"):
        pl.ExecuTorchResult.from_host(np.ones((4, 4), np.float32)[:, ::2])


@scenario(device_count=2)
def from_host_device_index(pl):
    v = np.arange(6, dtype=np.float32)
    r = pl.ExecuTorchResult.from_host(v, device_index=1)
    assert r.device == "cuda:1" and r.__dlpack_device__() == (2, 1)
    c = Counts(pl)
    np.testing.assert_array_equal(host(r), v)
    r.__dlpack__(dl_device=(2, 1))
    assert c.waits == 2
    with raises(BufferError, "cuda:1", "cuda:0"):
        r.__dlpack__(dl_device=(2, 0))
    with raises(RuntimeError, "cuda:2", "2 CUDA devices"):
        pl.ExecuTorchResult.from_host(v, device_index=2)


@scenario()
def dlpack_export_rules(pl):
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = pl.ExecuTorchResult.from_host(v)
    c = Counts(pl)
    legacy = r.__dlpack__()
    versioned = r.__dlpack__(max_version=(1, 0))
    assert "dltensor" in repr(legacy) and "dltensor_versioned" in repr(versioned)
    # To the host: a copy, unless the consumer forbids one.
    with raises(BufferError, "cuda:0", "copy=False"):
        r.__dlpack__(dl_device=(1, 0), copy=False)
    np.testing.assert_array_equal(np.from_dlpack(r, device="cpu"), v)
    np.testing.assert_array_equal(np.from_dlpack(r, device="cpu", copy=True), v)
    with raises(BufferError, "cuda:0"):
        r.__dlpack__(dl_device=(2, 1))
    with raises(BufferError, "device type 8"):
        r.__dlpack__(dl_device=(8, 0))
    with raises(TypeError, "stream"):
        r.__dlpack__(stream="fast")
    # copy=True on the device: a device-to-device copy, one wait in all.
    c.reset()
    copied = r.__dlpack__(copy=True, max_version=(1, 0))
    assert (c["allocations"], c["device_to_device"], c.waits) == (1, 1, 1)
    c.reset()
    r.__dlpack__(copy=True, stream=-1)
    assert c.waits == 0 and c["device_to_device"] == 1
    # NumPy cannot take a CUDA capsule.
    try:
        np.from_dlpack(r)
    except (BufferError, RuntimeError, TypeError, ValueError):
        pass
    else:
        raise AssertionError("np.from_dlpack of a CUDA result without device='cpu' should fail")
    # A CPU result cannot be exported to CUDA.
    h = r.to_host()
    with raises(BufferError, "from_host"):
        h.__dlpack__(dl_device=(2, 0))
    del legacy, versioned, copied


@scenario("cuda_mlp_device_io", "cuda_transformer_block")
def device_inputs_of_every_kind(pl):
    """CUDA inputs as ExecuTorchResult, DLPack capsule (legacy and versioned) and DLPack producer; a CUDA result
    passed back in is read as a device input."""
    name = "cuda_transformer_block"
    ref = reference(name)
    module = pl._load_for_executorch(pte(name))
    x = pl.ExecuTorchResult.from_host(ref["in0"])

    class Producer:
        def __init__(self, r):
            self.r = r

        def __dlpack__(self, **kw):
            return self.r.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.r.__dlpack_device__()
    for inp in (x, x.__dlpack__(), x.__dlpack__(max_version=(1, 0)), Producer(x)):
        check_outputs(name, module.forward([inp]))
    # A result fed back in, on the device the whole way: the block applied twice equals the block applied to the
    # host copy of its first output.
    once = module.forward([x])[0]
    c = Counts(pl)
    twice = module.forward([once])[0]
    assert c["host_to_device"] == 0 and c["device_to_host"] == 0
    again = module.forward([pl.ExecuTorchResult.from_host(host(once))])[0]
    np.testing.assert_allclose(host(twice), host(again), rtol=1e-5, atol=1e-6)
    # A borrowed result fed back in too.
    borrowed = module.forward([x], clone_outputs=False)[0]
    np.testing.assert_allclose(host(module.forward([borrowed])[0]), host(again), rtol=1e-5, atol=1e-6)
    # The unplanned input is aliased: no copy of it into the method's memory.
    mlp = pl._load_for_executorch(pte("cuda_mlp_device_io"))
    xi = pl.ExecuTorchResult.from_host(reference("cuda_mlp_device_io")["in0"])
    mlp.forward([xi])
    c.reset()
    mlp.forward([xi], clone_outputs=False)
    assert c["device_to_device"] == 0 and c["host_to_device"] == 0 and c["allocations"] == 0


@scenario("cuda_channels_last", "cuda_mlp_device_io")
def layout_rules(pl):
    """A non-torch CUDA input must already be in the exported layout."""
    ref = reference("cuda_channels_last")
    module = pl._load_for_executorch(pte("cuda_channels_last"))
    assert module.method_meta("forward").input_tensor_meta(0).dim_order() == (0, 2, 3, 1)
    good = pl.ExecuTorchResult.from_host(in_dim_order(ref["in0"], (0, 2, 3, 1)))
    check_outputs("cuda_channels_last", module.forward([good]))
    contiguous = pl.ExecuTorchResult.from_host(np.ascontiguousarray(ref["in0"]))
    capsule = contiguous.__dlpack__(max_version=(1, 0))
    for bad in (contiguous, capsule):
        c = Counts(pl)
        with raises(RuntimeError, "input 0", "cuda:0", "exported dim order", "exported layout"):
            module.forward([bad])
        assert c.waits == 1  # the wait before binding; nothing ran, so none after
    mlp = pl._load_for_executorch(pte("cuda_mlp_device_io"))
    transposed = pl.ExecuTorchResult.from_host(np.ones((16, 4), np.float32).T)
    with raises(RuntimeError, "input 0", "exported dim order"):
        mlp.forward([transposed])
    # The CPU layout conversion still applies to CPU inputs of CPU-input methods.
    add = pl._load_for_executorch(pte("cuda_add_default"))
    a = np.ones((3, 2), np.float32).T
    check = add.forward([a, a])[0]
    np.testing.assert_array_equal(np.asarray(check), 2 * np.ones((2, 3), np.float32))


@scenario("cuda_mlp_device_io", "cuda_add_default", device_count=2)
def device_mismatch(pl):
    ref = reference("cuda_mlp_device_io")
    mlp = pl._load_for_executorch(pte("cuda_mlp_device_io"))
    c = Counts(pl)
    with raises(RuntimeError, "input 0", "is on cpu", "expects it on cuda:0", "from_host"):
        mlp.forward([ref["in0"]])
    with raises(RuntimeError, "input 0", "is on cuda:1", "expects it on cuda:0"):
        mlp.forward([pl.ExecuTorchResult.from_host(ref["in0"], device_index=1)])
    add = pl._load_for_executorch(pte("cuda_add_default"))
    d = pl.ExecuTorchResult.from_host(np.ones((2, 3), np.float32))
    with raises(RuntimeError, "input 1", "is on cuda:0", "expects it on cpu"):
        add.forward([np.ones((2, 3), np.float32), d])
    assert c.waits == 0  # refused before any wait
    # The method still works afterwards.
    check_outputs("cuda_mlp_device_io", mlp.forward([pl.ExecuTorchResult.from_host(ref["in0"])]))


@scenario(hook=False)
def hook_only_before_loading(pl):
    pl._load_for_executorch(str(ROOT / "tests" / "fixtures" / "exported" / "add.pte"))
    with raises(RuntimeError, "before any program is loaded"):
        pl._testing_emulate_cuda()
    with raises(RuntimeError, "_testing_emulate_cuda was not called"):
        pl._testing_emulated_counters()


@scenario(hook=False)
def hook_docstring(pl):
    doc = pl._testing_emulate_cuda.__doc__
    for fragment in ("host memory", "EtrtCudaBackend", "before any program is loaded", "real CUDA consumer"):
        assert fragment in doc, fragment
    pl._testing_emulate_cuda(device_count=3)
    counters = pl._testing_emulated_counters()
    assert counters["device_count"] == 3 and counters["allocations"] == 0 and counters["delegate"]
    assert pl._get_registered_backend_names() == ["XnnpackBackend", "EtrtCudaBackend"] and pl._is_available("EtrtCudaBackend")
    assert pl._cuda_enabled() in (True, False)


@scenario("cuda_mixed")
def etdump_debug_buffer_reads_device_tensors(pl):
    """Intermediate outputs on the device reach the debug buffer through device-to-host copies; a delegate call logs
    every argument (Note [logged values] in include/etrt/method/method_execute.h)."""
    import importlib.util
    import tempfile
    spec = importlib.util.spec_from_file_location("etdump_dump", ROOT / "tools" / "etdump_dump.py")
    reader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reader)
    ref = reference("cuda_mixed")
    plain = pl._load_for_executorch(pte("cuda_mixed"))
    c = Counts(pl)
    plain.forward(method_inputs(pl, plain.method_meta("forward"), ref))
    copies_without_etdump = c["device_to_host"]
    module = pl._load_for_executorch(pte("cuda_mixed"), enable_etdump=True, debug_buffer_size=1 << 20)
    c.reset()
    outs = module.forward(method_inputs(pl, module.method_meta("forward"), ref))
    check_outputs("cuda_mixed", outs)
    assert c["device_to_host"] > copies_without_etdump  # device tensors were read through the device layer
    with tempfile.TemporaryDirectory() as d:
        module.write_etdump_result_to_file(f"{d}/x.etdp", f"{d}/x.bin")
        parsed = reader.parse(pathlib.Path(f"{d}/x.etdp").read_bytes())
        buffer = pathlib.Path(f"{d}/x.bin").read_bytes()
    [run] = [r for r in parsed["runs"] if r["name"] == "Execute"]
    delegates = sorted(e["instruction_id"] for e in run["events"]
                       if e["kind"] == "profile" and e["name"] == "DELEGATE_CALL")
    assert len(delegates) == 2, run["events"]
    debug = [e for e in run["events"] if e["kind"] == "debug"]
    for i in delegates:
        logged = [e for e in debug if e["instruction_id"] == i and not e["value"]["output"]]
        assert len(logged) >= 2, (i, logged)  # its inputs and outputs
        for e in logged:
            for t in e["value"]["tensors"]:
                assert t["offset"] % 64 == 0
    finals = [reader.value(e, buffer) for e in debug if e["value"]["output"]]
    assert len(finals) == len(outs)
    for got, o in zip(finals, outs):
        np.testing.assert_array_equal(got, host(o))


# ---- pytest side: one process per scenario -------------------------------------------------------------------------

def _package_root():
    """The sys.path entry this process imports `executorch.extension.pybindings` from, for the child process."""
    import importlib.util
    spec = importlib.util.find_spec("executorch_portable_lib")
    return str(pathlib.Path(spec.origin).parents[1])


SKIP_EXIT = 77  # a scenario process that cannot run here (it prints why)


def run_scenario(name, output_mode="executorch"):
    import pytest
    info = SCENARIOS[name]
    missing = [f for f in info["fixtures"] if not (CUDA_FIXTURES / f"{f}.pte").exists()]
    if missing:
        pytest.skip(f"CUDA fixture(s) {', '.join(missing)} not found in {CUDA_FIXTURES} "
                    "(made by tools/export/export_cuda_fixtures.py)")
    env = dict(os.environ)
    env["EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT"] = output_mode
    env["PYTHONPATH"] = os.pathsep.join([_package_root()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.run([sys.executable, __file__, name, str(info["device_count"]), "1" if info["hook"] else "0"],
                          env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode == SKIP_EXIT:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, f"scenario {name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def pytest_generate_tests(metafunc):
    if "scenario_name" in metafunc.fixturenames:
        metafunc.parametrize("scenario_name", sorted(SCENARIOS))


def test_emulated(scenario_name):
    run_scenario(scenario_name)


def test_hook_refused_in_torch_output_mode():
    import pytest
    if os.environ.get("ETRT_TEST_BLOCK_TORCH") == "1":
        pytest.skip("torch is blocked")
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    env = dict(os.environ, EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT="torch")
    env["PYTHONPATH"] = os.pathsep.join([_package_root()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    code = ("from executorch.extension.pybindings import portable_lib as pl\n"
            "try:\n    pl._testing_emulate_cuda()\nexcept RuntimeError as e:\n    print('refused:', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "refused:" in proc.stdout and "EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=executorch" in proc.stdout


if __name__ == "__main__":
    scenario_name, device_count, hook = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    if os.environ.get("ETRT_TEST_BLOCK_TORCH") == "1":
        sys.modules["torch"] = None
    from executorch.extension.pybindings import portable_lib as _pl
    assert _pl._output_mode == "executorch"
    if hook:
        _pl._testing_emulate_cuda(device_count)
        if SCENARIOS[scenario_name]["fixtures"] and not _pl._testing_emulated_counters()["delegate"]:
            print("these bindings were built without the host-kernel CUDA delegate "
                  "(include/etrt/backends/cuda/cuda_backend.h, host_ops.h), so the emulated device cannot run "
                  "delegated programs")
            sys.exit(SKIP_EXIT)
    SCENARIOS[scenario_name]["fn"](_pl)
    print(f"scenario {scenario_name}: ok")
