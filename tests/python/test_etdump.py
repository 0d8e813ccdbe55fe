"""ETDump intermediate outputs: enable_etdump=True with debug_buffer_size > 0 records every kernel's outputs and the
program outputs; write_etdump_result_to_file(path, debug_buffer_path) writes the .etdp and the whole debug buffer.
The files are parsed with the project's stand-alone reader (tools/etdump_dump.py) and the recorded tensors are
compared with what the method returned and with NumPy recomputations. A full debug buffer raises RuntimeError from
the call that overflowed (the pair of tests/cpp/test_etdump.cpp)."""
import importlib.util
import threading

import numpy as np
import pytest

from conftest import FIXTURES, ROOT, to_numpy

BUFFER = 1 << 16


@pytest.fixture(scope="module")
def reader():
    spec = importlib.util.spec_from_file_location("etdump_dump", ROOT / "tools" / "etdump_dump.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_and_parse(obj, tmp_path, reader, name="run"):
    etdp, dbg = tmp_path / f"{name}.etdp", tmp_path / f"{name}.bin"
    obj.write_etdump_result_to_file(str(etdp), str(dbg))
    return reader.parse(etdp.read_bytes()), dbg.read_bytes()


def execute_runs(parsed):
    return [r for r in parsed["runs"] if r["name"] == "Execute"]


def debug_events(run, outputs=False):
    return [e for e in run["events"] if e["kind"] == "debug" and e["value"]["output"] == outputs]


def by_instruction(run, reader, buffer):
    """{instruction id: [values]} of a run's intermediate outputs, read from the debug buffer."""
    out = {}
    for e in debug_events(run):
        out.setdefault(e["instruction_id"], []).append(reader.value(e, buffer))
    return out


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_module_records_each_kernel_output_and_the_program_output(portable_lib, tmp_path, reader):
    m = portable_lib._load_for_executorch(str(FIXTURES / "add_mul.pte"), enable_etdump=True,
                                          debug_buffer_size=BUFFER)
    x, y, z = rand(2, 2, seed=1), rand(2, 2, seed=2), rand(2, 2, seed=3)
    out = to_numpy(m.forward([x, y, z])[0])
    parsed, buffer = write_and_parse(m, tmp_path, reader)
    assert len(buffer) == BUFFER  # the whole buffer, as upstream writes it
    [run] = execute_runs(parsed)
    kinds = [(e["kind"], e.get("name"), e["instruction_id"]) for e in run["events"]]
    # Per instruction: its output, then its profile events; Method::execute; then the program output.
    assert kinds == [("debug", None, 0), ("profile", "native_call_mul.out", 0), ("profile", "OPERATOR_CALL", 0),
                     ("debug", None, 1), ("profile", "native_call_add.out", 1), ("profile", "OPERATOR_CALL", 1),
                     ("profile", "Method::execute", 0), ("debug", None, 0)]
    values = by_instruction(run, reader, buffer)
    np.testing.assert_array_equal(values[0][0], x * y)          # the intermediate, recomputed with NumPy
    np.testing.assert_array_equal(values[1][0], out)            # the last kernel's output is the method's output
    np.testing.assert_allclose(out, x * y + z, rtol=1e-6)
    for e in debug_events(run):
        assert e["chain_index"] == 0
        [t] = e["value"]["tensors"]
        assert t["offset"] % 64 == 0 and t["sizes"] == [2, 2] and t["strides"] == [2, 1] and t["scalar_type"] == 6
    [final] = debug_events(run, outputs=True)
    assert final["chain_index"] == reader.UNSET_CHAIN and final["instruction_id"] == 0
    np.testing.assert_array_equal(reader.value(final, buffer), out)


def test_program_method_records_mlp_intermediates(portable_lib, tmp_path, reader):
    prog = portable_lib._load_program(str(FIXTURES / "mlp.pte"), enable_etdump=True, debug_buffer_size=BUFFER)
    method = prog.load_method("forward")
    shape = prog.method_meta("forward").input_tensor_meta(0).sizes()
    x = rand(*shape, seed=4)
    method.set_inputs([x])
    method.execute()
    out = to_numpy(method.get_outputs()[0])
    parsed, buffer = write_and_parse(prog, tmp_path, reader)
    [run] = execute_runs(parsed)
    ops = [e["name"][len("native_call_"):] for e in run["events"]
           if e["kind"] == "profile" and e["name"].startswith("native_call_")]
    values = by_instruction(run, reader, buffer)
    assert sorted(values) == list(range(len(ops)))  # one output per kernel
    relu = ops.index("relu.out")
    addmm = relu - 1
    assert ops[addmm] == "addmm.out"
    # relu(addmm(x, ...)) recomputed from the recorded input of the relu.
    np.testing.assert_array_equal(values[relu][0], np.maximum(values[addmm][0], 0))
    # The first addmm: x @ W^T + b, with W^T the recorded permute_copy output; b is whatever makes up the rest.
    permute = ops.index("permute_copy.out")
    first_addmm = ops.index("addmm.out")
    bias = values[first_addmm][0] - x @ values[permute][0]
    np.testing.assert_allclose(bias, np.broadcast_to(bias[:1], bias.shape), atol=1e-5)  # the same row each time
    np.testing.assert_array_equal(values[len(ops) - 1][0], out)
    [final] = debug_events(run, outputs=True)
    np.testing.assert_array_equal(reader.value(final, buffer), out)


def test_channels_last_intermediates_are_read_through_their_strides(portable_lib, tmp_path, reader):
    m = portable_lib._load_for_executorch(str(FIXTURES / "channels_last.pte"), enable_etdump=True,
                                          debug_buffer_size=BUFFER)
    shape = m.method_meta("forward").input_tensor_meta(0).sizes()
    x = rand(*shape, seed=5)
    out = to_numpy(m.forward([x])[0])
    parsed, buffer = write_and_parse(m, tmp_path, reader)
    [run] = execute_runs(parsed)
    values = by_instruction(run, reader, buffer)
    conv, relu = values[0][0], values[1][0]
    np.testing.assert_array_equal(relu, np.maximum(conv, 0))
    np.testing.assert_array_equal(relu, out)
    strides = debug_events(run)[1]["value"]["tensors"][0]["strides"]
    assert strides[1] == 1  # channels last: the channel dimension is innermost in memory


def test_multi_output_kernel_and_tensor_lists(portable_lib, tmp_path, reader):
    m = portable_lib._load_for_executorch(str(FIXTURES / "maxpool.pte"), enable_etdump=True,
                                          debug_buffer_size=BUFFER)
    x = rand(*m.method_meta("forward").input_tensor_meta(0).sizes(), seed=6)
    outs = [to_numpy(o) for o in m.forward([x])]
    parsed, buffer = write_and_parse(m, tmp_path, reader)
    [run] = execute_runs(parsed)
    values, indices = by_instruction(run, reader, buffer)[0]  # max_pool2d_with_indices: out, then indices
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(values, outs[0])
    # The indices point at the maxima in each flattened input plane.
    n, c = x.shape[:2]
    planes = x.reshape(n, c, -1)
    gathered = np.take_along_axis(planes, indices.reshape(n, c, -1), axis=2).reshape(values.shape)
    np.testing.assert_array_equal(gathered, values)

    lstm = portable_lib._load_for_executorch(str(FIXTURES / "lstm_step.pte"), enable_etdump=True,
                                             debug_buffer_size=1 << 20)
    meta = lstm.method_meta("forward")
    inputs = [rand(*meta.input_tensor_meta(i).sizes(), seed=7 + i) for i in range(meta.num_inputs())]
    lstm.forward(inputs)
    parsed, buffer = write_and_parse(lstm, tmp_path, reader, name="lstm")
    [run] = execute_runs(parsed)
    lists = [e for e in debug_events(run) if e["value"]["type"] == "TensorList"]
    assert lists, "split_with_sizes_copy logs its outputs as a TensorList"
    for e in lists:
        parts = reader.value(e, buffer)
        assert len(parts) > 1 and all(isinstance(p, np.ndarray) for p in parts)


def test_runs_between_writes_share_the_buffer_and_each_write_starts_over(portable_lib, tmp_path, reader):
    m = portable_lib._load_for_executorch(str(FIXTURES / "add_mul.pte"), enable_etdump=True,
                                          debug_buffer_size=BUFFER)
    ins = [[rand(2, 2, seed=10 * k + i) for i in range(3)] for k in range(3)]
    outs = [to_numpy(m.forward(i)[0]) for i in ins[:2]]
    parsed, buffer = write_and_parse(m, tmp_path, reader, name="first")
    runs = execute_runs(parsed)
    assert len(runs) == 2
    offsets = [t["offset"] for r in runs for e in debug_events(r) + debug_events(r, True)
               for t in e["value"]["tensors"]]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    for run, x, out in zip(runs, ins, outs):
        np.testing.assert_array_equal(by_instruction(run, reader, buffer)[0][0], x[0] * x[1])
        np.testing.assert_array_equal(reader.value(debug_events(run, True)[0], buffer), out)
    out3 = to_numpy(m.forward(ins[2])[0])
    parsed, buffer = write_and_parse(m, tmp_path, reader, name="second")
    [run] = execute_runs(parsed)
    assert debug_events(run)[0]["value"]["tensors"][0]["offset"] == 0
    np.testing.assert_array_equal(reader.value(debug_events(run, True)[0], buffer), out3)


def test_concurrent_methods_record_separate_blocks(portable_lib, tmp_path, reader):
    """Two methods of one program share its ETDump; executions running at once on two threads (the GIL is released
    while they run) each get their own Execute block with their own values."""
    prog = portable_lib._load_program(str(FIXTURES / "two_methods.pte"), enable_etdump=True,
                                      debug_buffer_size=1 << 20)
    x = rand(2, 3, seed=11)
    expected = {"forward": 2 * x, "times_two": 2 * x}  # forward(x, x) = x + x
    errors = []

    def worker(name, inputs):
        try:
            method = prog.load_method(name)
            for _ in range(25):
                method.set_inputs(inputs)
                method.execute()
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=("forward", [x, x])),
               threading.Thread(target=worker, args=("times_two", [x]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    parsed, buffer = write_and_parse(prog, tmp_path, reader)
    runs = execute_runs(parsed)
    assert len(runs) == 50
    seen = {"forward": 0, "times_two": 0}
    for run in runs:
        ops = {e["name"] for e in run["events"] if e["kind"] == "profile" and e["name"].startswith("native_call_")}
        name = "forward" if ops == {"native_call_add.out"} else "times_two"
        assert name == "forward" or "native_call_mul.out" in ops, ops
        seen[name] += 1
        [final] = debug_events(run, outputs=True)
        np.testing.assert_array_equal(reader.value(final, buffer), expected[name])
        assert run["events"][-2]["name"] == "Method::execute"
    assert seen == {"forward": 25, "times_two": 25}


def test_full_debug_buffer_raises_from_the_call_that_overflowed(portable_lib, tmp_path, reader):
    x = [rand(2, 2, seed=i) for i in range(3)]
    want = x[0] * x[1] + x[2]
    # One execution needs 3 x 64 bytes (two intermediates and the program output, each 64-byte aligned).
    m = portable_lib._load_for_executorch(str(FIXTURES / "add_mul.pte"), enable_etdump=True, debug_buffer_size=100)
    with pytest.raises(RuntimeError, match=r"debug buffer overflow in method 'forward'.*need 192 bytes.*"
                                           r"has 100 bytes \(debug_buffer_size\).*"
                                           r"pass a larger debug_buffer_size \(at least 192\)"):
        m.forward(x)
    with pytest.raises(RuntimeError, match="at least 192"):  # still raising, never aborting
        m.forward(x)
    parsed, _ = write_and_parse(m, tmp_path, reader, name="dropped")
    assert execute_runs(parsed) == []  # the failed executions recorded nothing

    m = portable_lib._load_for_executorch(str(FIXTURES / "add_mul.pte"), enable_etdump=True, debug_buffer_size=192)
    np.testing.assert_allclose(to_numpy(m.forward(x)[0]), want, rtol=1e-6)
    with pytest.raises(RuntimeError, match=r"of which 144 hold earlier executions.*at least 336"):
        m.forward(x)
    parsed, buffer = write_and_parse(m, tmp_path, reader, name="one")
    [run] = execute_runs(parsed)
    np.testing.assert_array_equal(reader.value(debug_events(run, True)[0], buffer), to_numpy(m.forward(x)[0]))

    # The Method API: execute() raises, and the method stays usable.
    prog = portable_lib._load_program(str(FIXTURES / "add_mul.pte"), enable_etdump=True, debug_buffer_size=100)
    method = prog.load_method("forward")
    method.set_inputs(x)
    with pytest.raises(RuntimeError, match="debug buffer overflow"):
        method.execute()
    np.testing.assert_allclose(to_numpy(method.get_outputs()[0]), want, rtol=1e-6)  # the execution did complete


def test_write_errors_and_paths(portable_lib, tmp_path, reader, capsys):
    m = portable_lib._load_for_executorch(str(FIXTURES / "add.pte"), enable_etdump=True, debug_buffer_size=256)
    x = np.ones((2, 3), np.float32)
    m.forward([x, x])
    with pytest.raises(RuntimeError, match=r"Failed to open file .*no_such_dir.*: No such file or directory"):
        m.write_etdump_result_to_file(str(tmp_path / "ok.etdp"), str(tmp_path / "no_such_dir" / "x.bin"))
    with pytest.raises(RuntimeError, match=r"Failed to open file .*no_such_dir"):
        m.write_etdump_result_to_file(str(tmp_path / "no_such_dir" / "x.etdp"), str(tmp_path / "x.bin"))
    with pytest.raises(TypeError, match="debug_buffer_path must be a str or os.PathLike"):
        m.write_etdump_result_to_file(str(tmp_path / "x.etdp"), 42)
    # The failed writes kept the recording: an os.PathLike debug path works.
    m.write_etdump_result_to_file(str(tmp_path / "x.etdp"), tmp_path / "x.bin")
    parsed = reader.parse((tmp_path / "x.etdp").read_bytes())
    [run] = execute_runs(parsed)
    np.testing.assert_array_equal(reader.value(debug_events(run, True)[0], (tmp_path / "x.bin").read_bytes()), 2 * x)

    # Without a debug buffer, a debug_buffer_path is not written (and a log line says why).
    p = portable_lib._load_for_executorch(str(FIXTURES / "add.pte"), enable_etdump=True)
    p.forward([x, x])
    capsys.readouterr()
    p.write_etdump_result_to_file(str(tmp_path / "p.etdp"), str(tmp_path / "p.bin"))
    assert "debug_buffer_path" in capsys.readouterr().err and not (tmp_path / "p.bin").exists()
    [run] = execute_runs(reader.parse((tmp_path / "p.etdp").read_bytes()))
    assert debug_events(run) == [] and debug_events(run, True) == []


def test_bundled_program_loader_takes_a_debug_buffer(portable_lib, tmp_path, reader):
    bundle = portable_lib._load_bundled_program_from_buffer((FIXTURES / "add.bpte").read_bytes())
    m = portable_lib._load_for_executorch_from_bundled_program(bundle, enable_etdump=True, debug_buffer_size=BUFFER)
    x = rand(2, 3, seed=9)
    out = to_numpy(m.forward([x, x])[0])
    parsed, buffer = write_and_parse(m, tmp_path, reader)
    [run] = execute_runs(parsed)
    np.testing.assert_array_equal(by_instruction(run, reader, buffer)[0][0], out)


def test_debug_buffer_size_without_etdump_is_ignored_with_a_log(portable_lib, capsys):
    m = portable_lib._load_for_executorch(str(FIXTURES / "add.pte"), debug_buffer_size=1024)
    assert not m.has_etdump()
    assert "debug_buffer_size=1024 has no effect without enable_etdump=True" in capsys.readouterr().err


# The child process for the delegate test: the emulated CUDA device cannot be undone, so it runs apart (as in
# test_device_emulated.py, whose helpers place each input where the method expects it).
_EMULATED_RUN = """
import sys
out_dir, names = sys.argv[1], sys.argv[2:]
import test_device_emulated as emu
from executorch.extension.pybindings import portable_lib as pl
pl._testing_emulate_cuda(1)
if not pl._testing_emulated_counters()["delegate"]:
    print("these bindings have no host-kernel CUDA delegate, so the emulated device cannot run delegated programs")
    sys.exit(emu.SKIP_EXIT)
for name in names:
    m = pl._load_for_executorch(emu.pte(name), enable_etdump=True, debug_buffer_size=1 << 20)
    m.forward(emu.method_inputs(pl, m.method_meta("forward"), emu.reference(name)))
    m.write_etdump_result_to_file(f"{out_dir}/{name}.etdp", f"{out_dir}/{name}.bin")
"""


def test_delegate_calls_are_delegate_call_events(tmp_path, reader):
    """A delegate instruction is one DELEGATE_CALL profile event, as upstream's interpreter names it (upstream's
    Inspector gives such an event its backend's name), after the debug events of its arguments; kernel
    instructions keep native_call_<op> + OPERATOR_CALL. Real-exporter fixtures on the emulated CUDA device."""
    import os
    import subprocess
    import sys
    import test_device_emulated as emu
    # {fixture: (kernel instructions, delegate instructions)}; the et_copy copies around a delegate are kernels.
    cases = {"cuda_add_default": (3, 1), "cuda_mixed": (6, 2)}
    missing = [n for n in cases if not (emu.CUDA_FIXTURES / f"{n}.pte").exists()]
    if missing:
        pytest.skip(f"CUDA fixture(s) {', '.join(missing)} not found in {emu.CUDA_FIXTURES}")
    env = dict(os.environ, EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT="executorch")
    env["PYTHONPATH"] = os.pathsep.join([emu._package_root(), str(ROOT / "tests" / "python")] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.run([sys.executable, "-c", _EMULATED_RUN, str(tmp_path), *cases], env=env,
                          capture_output=True, text=True, timeout=300)
    if proc.returncode == emu.SKIP_EXIT:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name, (kernels, delegates) in cases.items():
        [run] = execute_runs(reader.parse((tmp_path / f"{name}.etdp").read_bytes()))
        per_instruction = {}
        for e in run["events"]:
            if e["kind"] == "profile" and e["name"] != "Method::execute":
                assert e["chain_index"] == 0 and e.get("delegate_debug_id_int", -1) == -1, e
                per_instruction.setdefault(e["instruction_id"], []).append(e["name"])
        calls = [n for n in per_instruction.values() if n == ["DELEGATE_CALL"]]
        ops = [n for n in per_instruction.values() if len(n) == 2 and n[0].startswith("native_call_")
               and n[1] == "OPERATOR_CALL"]
        assert (len(ops), len(calls)) == (kernels, delegates), (name, per_instruction)
        assert not any("native_call_EtrtCudaBackend" in n for n in per_instruction.values())
        # Each delegate call's arguments are logged before its profile event, with its instruction id.
        for i, n in per_instruction.items():
            if n == ["DELEGATE_CALL"]:
                at = next(k for k, e in enumerate(run["events"]) if e.get("name") == "DELEGATE_CALL"
                          and e["instruction_id"] == i)
                assert any(e["kind"] == "debug" and e["instruction_id"] == i for e in run["events"][:at])
