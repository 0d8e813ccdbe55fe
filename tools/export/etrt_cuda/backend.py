"""`EtrtCudaBackend`: preprocess lowers one partition (an edge ExportedProgram) into an ECU1 payload.

executorch's to_backend finds a backend by its class name, so the name must stay `EtrtCudaBackend`
(the runtime registers the same id). Importing this module is what makes the backend known.
"""
from __future__ import annotations

import operator
from typing import Dict, List, Optional

import torch
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from . import ops
from .payload import ABSENT, DTYPE_BOOL, DTYPE_FLOAT32, FLAG_INPUT, FLAG_OUTPUT, Op, Payload

BACKEND_ID = "EtrtCudaBackend"


def _dim_order(val: torch.Tensor) -> List[int]:
    try:
        return list(val.dim_order())
    except (AttributeError, RuntimeError) as e:  # ambiguous strides, e.g. size-1 dims: torch raises
        raise NotImplementedError(f"{BACKEND_ID}: cannot read the dim order of a boundary tensor: {e}") from e


def _dtype_code(val: torch.Tensor) -> int:
    if val.dtype == torch.bool:
        return DTYPE_BOOL
    if val.dtype == torch.float32:
        return DTYPE_FLOAT32
    raise NotImplementedError(f"{BACKEND_ID}: dtype {val.dtype} (float32 and bool are supported)")


def _constant_tensor(ep: ExportedProgram, target: str, kind: InputKind) -> torch.Tensor:
    if kind in (InputKind.PARAMETER, InputKind.BUFFER) and target in ep.state_dict:
        return ep.state_dict[target]
    if target in ep.constants:
        t = ep.constants[target]
        if isinstance(t, torch.Tensor):
            return t
    raise NotImplementedError(f"{BACKEND_ID}: no data for lifted {kind.name} '{target}'")


def build_payload(ep: ExportedProgram) -> Payload:
    """Walks the partition's graph: user inputs -> payload inputs, parameters/buffers/constants -> payload
    constants, call_function nodes -> payload nodes (ops.EDGE_OPS), the output node -> payload outputs."""
    sig = ep.graph_signature
    specs = {s.arg.name: s for s in sig.input_specs}
    p = Payload()
    ids: Dict[torch.fx.Node, object] = {}   # node -> value id, or tuple of ids for multi-output nodes

    def value_of(n: Optional[torch.fx.Node]) -> int:
        if n is None:
            return ABSENT
        if not isinstance(n, torch.fx.Node) or n not in ids or not isinstance(ids[n], int):
            raise NotImplementedError(f"{BACKEND_ID}: operand {n} is not a tensor value of the partition")
        return ids[n]

    for node in ep.graph.nodes:
        if node.op == "placeholder":
            spec = specs[node.name]
            val = node.meta.get("val")
            # A bool argument is a mask; the partitioner checked that its consumers take one.
            if not isinstance(val, torch.Tensor) or val.dtype not in (torch.float32, torch.bool):
                raise NotImplementedError(f"{BACKEND_ID}: input {node.name} is not a float32 or bool tensor")
            if (r := ops._static_tensor(val, f"input {node.name}", val.dtype)) is not None:
                raise NotImplementedError(f"{BACKEND_ID}: {r}")
            if spec.kind == InputKind.USER_INPUT:   # the delegate call's arguments, in placeholder order
                ids[node] = p.add_value(val.shape, _dim_order(val), _dtype_code(val))
                p.values[ids[node]].flags |= FLAG_INPUT
                p.inputs.append(ids[node])
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                if spec.kind == InputKind.BUFFER and spec.target in sig.buffers_to_mutate.values():
                    raise NotImplementedError(f"{BACKEND_ID}: mutable buffer '{spec.target}' cannot be lowered")
                data = _constant_tensor(ep, spec.target, spec.kind).detach()
                if data.dtype != torch.float32 or list(data.shape) != list(val.shape):
                    raise NotImplementedError(f"{BACKEND_ID}: constant '{spec.target}' data is {data.dtype}"
                                              f"{list(data.shape)}, the graph expects float32{list(val.shape)}")
                ids[node] = p.add_constant(data.contiguous().numpy())
            else:
                raise NotImplementedError(f"{BACKEND_ID}: input '{node.name}' of kind {spec.kind.name}")
        elif node.op == "call_function":
            if node.target is operator.getitem:
                src, idx = node.args
                if not isinstance(ids.get(src), tuple):
                    raise NotImplementedError(f"{BACKEND_ID}: getitem {node.name} of a single-output node")
                ids[node] = ids[src][idx]
                continue
            op, args, attrs = ops.lower(node)
            val = node.meta["val"]
            outs = tuple(p.add_value(v.shape, dtype=_dtype_code(v))
                         for v in (val if isinstance(val, (tuple, list)) else [val]))
            p.add_node(op, [value_of(a) for a in args], outs, attrs)
            ids[node] = outs if isinstance(val, (tuple, list)) else outs[0]
        elif node.op == "output":
            _set_outputs(p, ep, node, ids)
        else:
            raise NotImplementedError(f"{BACKEND_ID}: unsupported {node.op} node {node.name}")
    return p


def _set_outputs(p: Payload, ep: ExportedProgram, node: torch.fx.Node, ids: Dict[torch.fx.Node, object]) -> None:
    kinds = [s.kind for s in ep.graph_signature.output_specs]
    if any(k != OutputKind.USER_OUTPUT for k in kinds):
        raise NotImplementedError(f"{BACKEND_ID}: partition outputs of kinds {[k.name for k in kinds]} "
                                  "(only user outputs are supported)")
    used = set()
    for out in node.args[0]:
        if not isinstance(out, torch.fx.Node) or not isinstance(ids.get(out), int):
            raise NotImplementedError(f"{BACKEND_ID}: partition output {out} is not a tensor value")
        vid = ids[out]
        val = out.meta["val"]
        v = p.values[vid]
        # Outputs are written by a node and appear once: a placeholder (input or constant) or a repeated
        # output goes through an explicit COPY.
        if v.flags or vid in used:
            copy = p.add_value(v.sizes, dtype=v.dtype)
            p.add_node(Op.COPY, [vid], [copy])
            vid = copy
        used.add(vid)
        p.values[vid].dim_order = tuple(_dim_order(val))
        p.values[vid].flags |= FLAG_OUTPUT
        p.outputs.append(vid)


class EtrtCudaBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: List[CompileSpec]) -> PreprocessResult:
        for spec in compile_specs:
            if spec.key == "target_device":
                dev = spec.value.decode("utf-8")
                if not dev.lower().startswith("cuda"):
                    raise ValueError(f"{BACKEND_ID}: target_device '{dev}' is not a CUDA device")
        payload = build_payload(edge_program)
        return PreprocessResult(processed_bytes=payload.to_bytes())


__all__ = ["EtrtCudaBackend", "BACKEND_ID", "build_payload"]
