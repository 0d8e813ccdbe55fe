#!/usr/bin/env python3
"""Export the CUDA-delegate fixtures with the REAL upstream ExecuTorch exporter and our EtrtCudaPartitioner.

Run with the export venv (see tools/export/make_export_venv.sh); no GPU is needed:

    .venv-export/bin/python tools/export/export_cuda_fixtures.py [--out tests/fixtures/cuda] [--only NAME ...]

Flow per fixture: torch.export.export(strict=False) -> executorch.exir.to_edge_transform_and_lower(
partitioner=[EtrtCudaPartitioner()]) -> .to_executorch(ExecutorchBackendConfig(...)). For every fixture NAME it
writes NAME.pte and NAME.npz (in0.., out0..: float32 inputs and torch-eager outputs in logical row-major order)
and an entry of manifest.json, filled from the SERIALIZED program read back with executorch's own deserializer
(devices, memory planning, buffer devices, operators, delegate calls and payloads).

Before writing, each fixture is checked: the lowered edge program is interpreted with every delegate call
replaced by etrt_cuda.reference (a NumPy interpreter of the ECU1 payload) and must reproduce torch eager; every
payload extracted from the .pte must equal the lowered one and reproduce the outputs captured for it.
Any failure aborts the export (nothing is skipped).
"""
from __future__ import annotations

import argparse
import copy
import datetime
import json
import logging
import os
import platform
import sys
import warnings
from dataclasses import dataclass, field
from importlib.metadata import version as pkg_version
from typing import Any, Callable, Dict, List, Tuple

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.export import export  # noqa: E402
from torch.export.graph_signature import InputKind  # noqa: E402

from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower  # noqa: E402
from executorch.exir import schema as et_schema  # noqa: E402
from executorch.exir._serialize._program import deserialize_pte_binary  # noqa: E402
from executorch.exir.delegate import executorch_call_delegate  # noqa: E402
from executorch.exir.passes import MemoryPlanningPass  # noqa: E402
from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etrt_cuda import BACKEND_ID, EtrtCudaPartitioner, Payload, reference  # noqa: E402
from export_fixtures import (  # noqa: E402
    SCALAR_TYPE_TO_DTYPE, HandTransformerBlock, _file_layout, _sha256, _transformer_block)

SEED = 20240607
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(REPO_ROOT, "tests", "fixtures", "cuda")
TOL_F32 = {"rtol": 1e-5, "atol": 1e-6}
TOL_F32_LOOSE = {"rtol": 1e-4, "atol": 1e-5}


# --------------------------------------------------------------------------- #
# Models
# --------------------------------------------------------------------------- #
class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class AffineRelu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)


class Mixed(torch.nn.Module):
    """delegated (Linear+ReLU) -> CPU (cumsum, not in the op table) -> delegated (sigmoid*2 + x)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        c = torch.cumsum(torch.relu(self.fc(x)), dim=1)
        return torch.sigmoid(c) * 2.0 + x, c


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()


# --------------------------------------------------------------------------- #
# Fixture definitions
# --------------------------------------------------------------------------- #
@dataclass
class Fixture:
    name: str
    description: str
    make: Callable[[], Tuple[torch.nn.Module, tuple]]
    # keyword arguments of ExecutorchBackendConfig, as plain data (also written to the manifest)
    config: Dict[str, Any] = field(default_factory=dict)
    tolerance: Dict[str, float] = field(default_factory=lambda: dict(TOL_F32))
    notes: List[str] = field(default_factory=list)


DEVICE_IO = {"skip_h2d_for_method_inputs": True, "skip_d2h_for_method_outputs": True}

FIXTURES: List[Fixture] = [
    Fixture(
        "cuda_add_default", "forward(x, y) = x + y, float32 [2,3], whole graph delegated; default memory "
        "planning with enable_non_cpu_memory_planning=True (h2d/d2h copies around the delegate)",
        lambda: (Add(), (torch.randn(2, 3), torch.randn(2, 3))),
        config={"enable_non_cpu_memory_planning": True},
    ),
    Fixture(
        "cuda_mlp_device_io", "Linear(16,32)-ReLU-Linear(32,8) on [4,16], whole graph delegated; device IO "
        "(skip h2d/d2h), input not planned (caller's CUDA tensor aliased), output planned in the CUDA arena",
        lambda: (_mlp(), (torch.randn(4, 16),)),
        config={"propagate_device_config": DEVICE_IO, "enable_non_cpu_memory_planning": True,
                "memory_planning_pass": {"alloc_graph_input": False, "alloc_graph_output": True}},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "cuda_mlp_unplanned_out", "the cuda_mlp_device_io model and device IO, with neither the input nor the "
        "output memory planned (both are the caller's CUDA tensors)",
        lambda: (_mlp(), (torch.randn(4, 16),)),
        config={"propagate_device_config": DEVICE_IO, "enable_non_cpu_memory_planning": True,
                "memory_planning_pass": {"alloc_graph_input": False, "alloc_graph_output": False}},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "cuda_channels_last", "relu(x * 2.0 + 1.0) on a channels-last [1,3,8,8] input (dim_order [0,2,3,1]), "
        "whole graph delegated; device IO, input not planned, output planned",
        lambda: (AffineRelu(), (torch.randn(1, 3, 8, 8).to(memory_format=torch.channels_last),)),
        config={"propagate_device_config": DEVICE_IO, "enable_non_cpu_memory_planning": True,
                "memory_planning_pass": {"alloc_graph_input": False, "alloc_graph_output": True}},
        notes=["The npz arrays are in logical NCHW order; the program's input and output tensors have "
               "dim_order [0,2,3,1], and so do the payload's input and output values."],
    ),
    Fixture(
        "cuda_transformer_block", "HandTransformerBlock (tools/export/export_fixtures.py: pre-LN, 4-head "
        "attention, GELU MLP) on [2,8,32], whole graph delegated; device IO, neither input nor output planned",
        lambda: (HandTransformerBlock().eval(), (torch.randn(2, 8, 32),)),
        config={"propagate_device_config": DEVICE_IO, "enable_non_cpu_memory_planning": True,
                "memory_planning_pass": {"alloc_graph_input": False, "alloc_graph_output": False}},
        tolerance=dict(TOL_F32_LOOSE),
    ),
    Fixture(
        "cuda_mixed", "forward(x) = (sigmoid(c) * 2.0 + x, c) with c = cumsum(relu(Linear(8,8)(x)), 1), x [4,8]: "
        "delegate 0 (addmm, relu), aten::cumsum on the CPU, delegate 1 (sigmoid, mul, add); default planning "
        "with enable_non_cpu_memory_planning=True",
        lambda: (Mixed().eval(), (torch.randn(4, 8),)),
        config={"enable_non_cpu_memory_planning": True},
        tolerance=dict(TOL_F32_LOOSE),
        notes=["Output 1 (c) is computed on the CPU by cumsum.out; output 0 comes back from delegate 1 "
               "through a _d2h_copy."],
    ),
    Fixture(
        "cuda_encoder_layer", "the zoo's transformer block (nn.TransformerEncoderLayer(d_model=32, nhead=4, "
        "dim_feedforward=64, batch_first=True, dropout=0), as tests/fixtures/exported/transformer_block) on "
        "[2,8,32]: the whole graph in one delegate, the exporter's NaN guard on the attention weights included "
        "(bool masks: select_copy, eq.Scalar, logical_not, any.dim, full_like, where.self); default planning with "
        "enable_non_cpu_memory_planning=True",
        lambda: (_transformer_block(), (torch.randn(2, 8, 32),)),
        config={"enable_non_cpu_memory_planning": True},
        tolerance=dict(TOL_F32_LOOSE),
    ),
]


def backend_config(cfg: Dict[str, Any]) -> ExecutorchBackendConfig:
    kw = dict(cfg)
    if "propagate_device_config" in kw:
        kw["propagate_device_config"] = PropagateDeviceConfig(**kw["propagate_device_config"])
    if "memory_planning_pass" in kw:
        kw["memory_planning_pass"] = MemoryPlanningPass(**kw["memory_planning_pass"])
    return ExecutorchBackendConfig(**kw)


# --------------------------------------------------------------------------- #
# Verification: interpret the lowered edge program with the reference for every delegate call
# --------------------------------------------------------------------------- #
class _ReferenceInterpreter(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__(gm)
        self.calls: List[Dict[str, Any]] = []  # per delegate call: lowered module, inputs, outputs (numpy)

    def call_function(self, target, args, kwargs):
        if target is not executorch_call_delegate:
            return super().call_function(target, args, kwargs)
        lowered, ins = args[0], args[1:]
        if lowered.backend_id != BACKEND_ID:
            raise RuntimeError(f"unexpected delegate {lowered.backend_id}")
        np_ins = [t.detach().numpy() for t in ins]   # logical arrays, whatever the strides
        outs = reference.run(lowered.processed_bytes, np_ins)
        self.calls.append({"lowered": lowered, "inputs": np_ins, "outputs": outs})
        return tuple(torch.from_numpy(o) for o in outs)


def simulate(ep, user_inputs: tuple) -> Tuple[List[torch.Tensor], List[Dict[str, Any]]]:
    args, it = [], iter(user_inputs)
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            args.append(next(it))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER) and spec.target in ep.state_dict:
            args.append(ep.state_dict[spec.target])
        else:
            args.append(ep.constants[spec.target])
    interp = _ReferenceInterpreter(ep.graph_module)
    with torch.no_grad():
        out = interp.run(*args)
    return list(out), interp.calls


def _check_close(what: str, got: np.ndarray, want: np.ndarray, tol: Dict[str, float]) -> float:
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape} != {want.shape}")
    if not np.allclose(got, want, rtol=tol["rtol"], atol=tol["atol"]):
        raise AssertionError(f"{what}: max |err| {np.abs(got - want).max()} beyond {tol}")
    return float(np.abs(got.astype(np.float64) - want).max()) if got.size else 0.0


# --------------------------------------------------------------------------- #
# Reading the serialized program back
# --------------------------------------------------------------------------- #
def _device(t: et_schema.Tensor) -> str:
    e = t.extra_tensor_info
    if e is None or e.device_type == et_schema.DeviceType.CPU:
        return "cpu"
    return f"{e.device_type.name.lower()}:{e.device_index}"


def _tensor_info(plan: et_schema.ExecutionPlan, idx: int) -> Dict[str, Any]:
    t = plan.values[idx].val
    if not isinstance(t, et_schema.Tensor):
        return {"value_index": idx, "kind": type(t).__name__}
    st = t.scalar_type.name
    info: Dict[str, Any] = {
        "value_index": idx, "dtype": SCALAR_TYPE_TO_DTYPE.get(st, st), "sizes": list(t.sizes),
        "dim_order": list(t.dim_order), "device": _device(t), "memory_planned": t.allocation_info is not None,
        "extra_tensor_info_written": t.extra_tensor_info is not None,
    }
    if t.allocation_info is not None:
        a = t.allocation_info
        info["allocation"] = {"memory_id": a.memory_id,
                              "offset": (a.memory_offset_high << 32) | a.memory_offset_low}
    if t.data_buffer_idx:
        info["constant_data_buffer_idx"] = t.data_buffer_idx
    return info


def _op_name(op: et_schema.Operator) -> str:
    return f"{op.name}.{op.overload}" if op.overload else op.name


def _instructions(plan: et_schema.ExecutionPlan) -> List[Dict[str, Any]]:
    out = []
    for chain in plan.chains:
        for ins in chain.instructions:
            a = ins.instr_args
            if isinstance(a, et_schema.KernelCall):
                out.append({"kind": "KernelCall", "op": _op_name(plan.operators[a.op_index]), "args": list(a.args)})
            elif isinstance(a, et_schema.DelegateCall):
                out.append({"kind": "DelegateCall", "delegate_index": a.delegate_index, "args": list(a.args)})
            else:
                out.append({"kind": type(a).__name__})
    return out


def read_back(pte: bytes) -> Tuple[et_schema.ExecutionPlan, List[bytes], Dict[str, Any]]:
    """The plan and the delegate payloads, as executorch's deserializer reads them from the file."""
    program = deserialize_pte_binary(pte).program
    if len(program.execution_plan) != 1:
        raise AssertionError("expected one method")
    plan = program.execution_plan[0]
    payloads = []
    for d in plan.delegates:
        if d.processed.location != et_schema.DataLocation.INLINE:
            raise AssertionError("deserializer did not restore the delegate data inline")
        payloads.append(bytes(program.backend_delegate_data[d.processed.index].data))
    layout = _file_layout(pte)
    return plan, payloads, layout


def _raw_delegate_locations(pte: bytes) -> List[Dict[str, Any]]:
    """Where each payload is stored in the file (segment or inline), from the raw flatbuffer."""
    from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program  # noqa: PLC0415
    size = int.from_bytes(pte[16:24], "little") if pte[8:12] == b"eh00" else len(pte)
    prog = _flatbuffer_to_program(pte[:size])
    return [{"location": d.processed.location.name, "index": d.processed.index}
            for d in prog.execution_plan[0].delegates]


def plan_info(plan: et_schema.ExecutionPlan, payloads: List[bytes], pte: bytes) -> Dict[str, Any]:
    instrs = _instructions(plan)
    locations = _raw_delegate_locations(pte)
    delegates = []
    for k, d in enumerate(plan.delegates):
        calls = [i for i in instrs if i["kind"] == "DelegateCall" and i["delegate_index"] == k]
        p = Payload.from_bytes(payloads[k])
        n_in = len(p.inputs)
        delegates.append({
            "delegate_index": k,
            "backend_id": d.id,
            "compile_specs": {c.key: bytes(c.value).decode("utf-8", "replace") for c in d.compile_specs},
            "stored": locations[k],
            "payload_size": len(payloads[k]),
            "payload_sha256": _sha256(payloads[k]),
            "payload": p.describe(),
            "calls": [{"args": [dict(_tensor_info(plan, a), role="input" if j < n_in else "output")
                                for j, a in enumerate(c["args"])]} for c in calls],
        })
    return {
        "operators": [_op_name(op) for op in plan.operators],
        "inputs": [_tensor_info(plan, i) for i in plan.inputs],
        "outputs": [_tensor_info(plan, i) for i in plan.outputs],
        "non_const_buffer_sizes": list(plan.non_const_buffer_sizes),
        "non_const_buffer_device": (None if plan.non_const_buffer_device is None else [
            {"buffer_idx": b.buffer_idx, "device": ("cpu" if b.device_type == et_schema.DeviceType.CPU
                                                    else f"{b.device_type.name.lower()}:{b.device_index}")}
            for b in plan.non_const_buffer_device]),
        "num_values": len(plan.values),
        "instructions": instrs,
        "delegates": delegates,
    }


# --------------------------------------------------------------------------- #
# Export
# --------------------------------------------------------------------------- #
def _np(t: torch.Tensor) -> np.ndarray:
    return np.array(t.detach().numpy(), dtype=np.float32, order="C")


def _flatten(o) -> list:
    return [x for e in o for x in _flatten(e)] if isinstance(o, (tuple, list)) else [o]


def export_fixture(fx: Fixture, out_dir: str) -> Dict[str, Any]:
    torch.manual_seed(SEED + sum(map(ord, fx.name)))
    module, inputs = fx.make()
    with torch.no_grad():
        eager = [o.clone() for o in _flatten(copy.deepcopy(module)(*[x.clone() for x in inputs]))]

    partitioner = EtrtCudaPartitioner()
    edge = to_edge_transform_and_lower(export(copy.deepcopy(module), inputs, strict=False),
                                       partitioner=[partitioner])
    lowered_ep = edge.exported_program()
    lowered_graph = str(lowered_ep.graph)

    # 1. the lowered program, with every delegate call run by the NumPy reference, reproduces torch eager
    sim_out, calls = simulate(lowered_ep, inputs)
    if not calls:
        raise AssertionError(f"nothing was delegated ({partitioner.last_rejected})")
    max_err = [_check_close(f"{fx.name} out{i} (reference vs eager)", _np(s), _np(e), fx.tolerance)
               for i, (s, e) in enumerate(zip(sim_out, eager))]
    if len(sim_out) != len(eager):
        raise AssertionError(f"{len(sim_out)} outputs, eager has {len(eager)}")

    epm = edge.to_executorch(backend_config(fx.config))
    pte = epm.buffer

    # 2. read the file back; every payload in it equals a lowered one and reproduces its captured outputs
    plan, payloads, layout = read_back(pte)
    info = plan_info(plan, payloads, pte)
    payload_checks = []
    for k, blob in enumerate(payloads):
        match = [c for c in calls if c["lowered"].processed_bytes == blob]
        if not match:
            raise AssertionError(f"{fx.name}: payload {k} in the file differs from every lowered payload")
        c = match[0]
        if Payload.from_bytes(blob).to_bytes() != blob:
            raise AssertionError(f"{fx.name}: payload {k} does not survive a read/write round trip")
        got = reference.run(blob, c["inputs"])
        errs = [_check_close(f"{fx.name} delegate {k} out{j}", g, w, {"rtol": 0.0, "atol": 0.0})
                for j, (g, w) in enumerate(zip(got, c["outputs"]))]
        # the payload's boundary values agree with the program's delegate arguments
        for call in info["delegates"][k]["calls"]:
            desc = info["delegates"][k]["payload"]
            for a, v in zip(call["args"], desc["inputs"] + desc["outputs"]):
                if a["sizes"] != v["sizes"] or a["dim_order"] != v["dim_order"]:
                    raise AssertionError(f"{fx.name}: delegate {k} arg {a} disagrees with payload value {v}")
        payload_checks.append({"delegate_index": k, "inputs_from": "eager-equivalent intermediates "
                               "captured while interpreting the lowered program", "max_abs_err": max(errs)})

    arrays = {f"in{i}": _np(x) for i, x in enumerate(inputs)}
    arrays.update({f"out{i}": _np(o) for i, o in enumerate(eager)})
    with open(os.path.join(out_dir, f"{fx.name}.pte"), "wb") as f:
        f.write(pte)
    npz_path = os.path.join(out_dir, f"{fx.name}.npz")
    np.savez(npz_path, **arrays)   # np.savez embeds no timestamps when given a path -> deterministic bytes
    with open(npz_path, "rb") as f:
        npz_bytes = f.read()

    return {
        "name": fx.name,
        "description": fx.description,
        "files": {"pte": f"{fx.name}.pte", "npz": f"{fx.name}.npz"},
        "sha256": {"pte": _sha256(pte), "npz": _sha256(npz_bytes)},
        "main_method": plan.name,
        "eager_inputs": [{"dtype": "float32", "shape": list(x.shape),
                          **({"memory_format": "channels_last"} if x.dim() == 4 and not x.is_contiguous() else {})}
                         for x in inputs],
        "export": {
            "flow": "torch.export.export(strict=False) -> executorch.exir.to_edge_transform_and_lower("
                    "partitioner=[EtrtCudaPartitioner()]) -> .to_executorch(ExecutorchBackendConfig(...))",
            "partitioner": {"class": "EtrtCudaPartitioner", "device_index": partitioner.device_index,
                            "not_delegated": partitioner.last_rejected},
            "backend_config": fx.config,
            "lowered_edge_graph": lowered_graph.strip().splitlines(),
        },
        "tolerance": fx.tolerance,
        "npz": {"keys": list(arrays), "layout": "logical (row-major over the tensor's sizes), "
                "independent of dim_order"},
        **info,
        "verification": {
            "reference_vs_eager_max_abs_err": max_err,
            "payloads": payload_checks,
        },
        "file_layout": layout,
        "notes": list(fx.notes),
    }


# Facts about the files executorch 1.5.1 produces with this partitioner (checked when this script was written;
# the per-fixture data in the manifest is authoritative).
OBSERVATIONS = [
    "The target_device CompileSpec is serialized with the delegate (compile_specs {'target_device': 'cuda:0'}); "
    "the payload is stored in a segment (extract_delegate_segments=True), not inline.",
    "Every delegate argument is a device tensor: its Tensor has ExtraTensorInfo(device_type=CUDA, "
    "device_index=0). CPU tensors get no ExtraTensorInfo at all (None), so 'no ExtraTensorInfo' means CPU.",
    "Without skips, et_copy::_h2d_copy.out (args self, out, out) fills each delegate input in the CUDA arena "
    "and et_copy::_d2h_copy.out reads each delegate output back into a CPU tensor; the method's own inputs "
    "and outputs stay CPU and planned. Each delegate input gets its own copy: in cuda_mixed the method input "
    "is copied to the device twice (values 1 and 8), once per delegate.",
    "With skip_h2d/skip_d2h the method's input/output values ARE the delegate arguments, tagged CUDA; no copy "
    "kernels are emitted and the program's operators list is empty. An unplanned one (alloc_graph_input/"
    "alloc_graph_output=False) must be supplied by the caller as device memory.",
    "Per-device planning: buffer 0 is reserved (size 0); CPU buffers come first, then device buffers. So the "
    "CUDA arena is memory_id 2 when CPU tensors are planned too (cuda_add_default, cuda_mixed) and memory_id 1 "
    "when only device tensors are planned (cuda_mlp_device_io, cuda_channels_last).",
    "non_const_buffer_device is written only when some planned buffer is on a device, and then lists only "
    "the device buffers (e.g. [{buffer_idx: 2, CUDA:0}]); CPU buffers are implied. When no device tensor is "
    "planned (cuda_mlp_unplanned_out, cuda_transformer_block: all device tensors are unplanned method I/O), "
    "it is absent and non_const_buffer_sizes is [0, 0] although the delegate arguments are CUDA tensors.",
    "Planning reuses CPU memory across the copies: in cuda_add_default the output (d2h target) is at the same "
    "CPU offset as input y, which is dead once copied to the device.",
    "Python float scalars (x * 2.0) reach the delegate as 0-dim float32 constant tensors (lifted "
    "constants embedded in the payload); int scalars (x * 2) would become an int64 constant converted by "
    "dim_order_ops::_to_dim_order_copy on the CPU and then copied to the device.",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", help="export only these fixtures (manifest is merged)")
    ap.add_argument("--date", default=None, help="date string to record (default: today, UTC)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.use_deterministic_algorithms(True, warn_only=True)

    manifest_path = os.path.join(args.out, "manifest.json")
    old: Dict[str, Any] = {}
    if args.only and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            old = json.load(f)
    entries: Dict[str, Any] = {e["name"]: e for e in old.get("fixtures", [])}
    for fx in FIXTURES:
        if args.only and fx.name not in args.only:
            continue
        print(f"[export] {fx.name} ...", flush=True)
        entries[fx.name] = export_fixture(fx, args.out)   # any failure aborts the export
        e = entries[fx.name]
        print(f"[export] {fx.name}: ok; operators {e['operators']}; delegates {len(e['delegates'])}; "
              f"inputs {[i['device'] for i in e['inputs']]} outputs {[o['device'] for o in e['outputs']]}",
              flush=True)

    order = [fx.name for fx in FIXTURES]
    fixtures = sorted(entries.values(), key=lambda e: order.index(e["name"]) if e["name"] in order else 999)
    manifest = {
        "format": "executorch-fixtures-manifest/1",
        "generated_by": "tools/export/export_cuda_fixtures.py",
        "date": args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "seed": SEED,
        "versions": {
            "torch": torch.__version__,
            "executorch": pkg_version("executorch"),
            "numpy": np.__version__,
            "flatbuffers": pkg_version("flatbuffers"),
            "python": platform.python_version(),
        },
        "backend_id": BACKEND_ID,
        "payload_format": "ECU1 version 1 (include/etrt/backends/cuda/PAYLOAD.md)",
        "all_operators": sorted({op for e in fixtures for op in e["operators"]}),
        "observations": OBSERVATIONS,
        "fixtures": fixtures,
    }
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"wrote {len(fixtures)} fixtures -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
