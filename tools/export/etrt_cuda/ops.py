"""The edge ops the CUDA delegate lowers, and how each maps onto payload nodes (PAYLOAD.md's op table).

Shared by the partitioner (`unsupported_reason`: can this node go into a partition?) and by preprocess
(`lower`: the payload node(s) for this node). Keys are EdgeOpOverload names (`aten.add.Tensor`).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .payload import MAX_RANK, Op

FLOAT32 = torch.float32
BOOL = torch.bool


def op_name(target: Any) -> Optional[str]:
    """`aten.add.Tensor` for an EdgeOpOverload (or an aten OpOverload), None for anything else."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    name = getattr(target, "__name__", None)
    if type(target).__name__ == "EdgeOpOverload" and isinstance(name, str):
        return name
    return None


def arg(node: torch.fx.Node, index: int, name: str, default: Any = None) -> Any:
    """A call argument given positionally or as a keyword."""
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def _nonneg_dim(d: int, rank: int) -> int:
    d = int(d)
    if not -max(rank, 1) <= d < max(rank, 1):
        raise ValueError(f"dim {d} out of range for rank {rank}")
    return d % max(rank, 1)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# A lowering gets the node and returns (op, tensor-arg nodes (None = absent), attrs); the node's outputs are the
# payload node's outputs (LAYER_NORM: all three).
Lowering = Callable[[torch.fx.Node], Tuple[Op, List[Optional[torch.fx.Node]], List[float]]]


@dataclass(frozen=True)
class EdgeOp:
    lower: Lowering
    check: Optional[Callable[[torch.fx.Node], Optional[str]]] = None  # extra checks: None if fine, else reason
    # dtypes of the node's tensor operands in argument order (float32 for any not listed) and of its outputs:
    # bool only where the payload op reads or writes a mask (PAYLOAD.md's dtypes column)
    in_dtypes: Tuple[torch.dtype, ...] = ()
    out_dtype: torch.dtype = FLOAT32


def _binary(op: Op, with_alpha: bool) -> EdgeOp:
    def lower(n):
        return op, [n.args[0], n.args[1]], ([float(arg(n, 2, "alpha", 1))] if with_alpha else [])

    def check(n):
        if not all(isinstance(a, torch.fx.Node) for a in n.args[:2]):
            return "both operands must be tensors"
        if with_alpha and not _is_number(arg(n, 2, "alpha", 1)):
            return "alpha must be a number"
        return None
    return EdgeOp(lower, check)


def _scalar(op: Op, transform: Callable[[float, float], float], divides: bool = False) -> EdgeOp:
    def lower(n):
        return op, [n.args[0]], [transform(float(n.args[1]), float(arg(n, 2, "alpha", 1)))]

    def check(n):
        if not _is_number(n.args[1]) or not _is_number(arg(n, 2, "alpha", 1)):
            return "the scalar operand must be a number"
        if divides and float(n.args[1]) == 0.0:
            return "division by a zero scalar"
        return None
    return EdgeOp(lower, check)


def _unary(op: Op) -> EdgeOp:
    return EdgeOp(lambda n: (op, [n.args[0]], []))


def _gelu_check(n):
    return None if arg(n, 1, "approximate", "none") in ("none", "tanh") else "unknown gelu approximation"


def _softmax_lower(n):
    rank = len(n.args[0].meta["val"].shape)
    return Op.SOFTMAX, [n.args[0]], [_nonneg_dim(n.args[1], rank)]


def _softmax_check(n):
    return "half_to_float=True" if arg(n, 2, "half_to_float", False) else None


def _layer_norm_lower(n):
    x, shape, w, b, eps = (arg(n, i, k) for i, k in enumerate(("input", "normalized_shape", "weight", "bias", "eps")))
    return Op.LAYER_NORM, [x, w, b], [float(eps), len(shape)]


def _layer_norm_check(n):
    x, shape = n.args[0], list(n.args[1])
    xs = list(x.meta["val"].shape)
    if not shape or xs[len(xs) - len(shape):] != shape:
        return f"normalized_shape {shape} is not the trailing sizes of {xs}"
    for w in (arg(n, 2, "weight"), arg(n, 3, "bias")):
        if w is not None and list(w.meta["val"].shape) != shape:
            return "weight/bias sizes differ from normalized_shape"
    return None


def _permute_lower(n):
    rank = len(n.args[0].meta["val"].shape)
    return Op.PERMUTE, [n.args[0]], [_nonneg_dim(d, rank) for d in n.args[1]]


def _transpose_lower(n):
    rank = len(n.args[0].meta["val"].shape)
    perm = list(range(rank))
    if rank:
        d0, d1 = _nonneg_dim(n.args[1], rank), _nonneg_dim(n.args[2], rank)
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return Op.PERMUTE, [n.args[0]], perm


def _addmm_lower(n):
    return Op.ADDMM, [n.args[0], n.args[1], n.args[2]], [float(arg(n, 3, "beta", 1)), float(arg(n, 4, "alpha", 1))]


def _ranks(*ranks: int, first: int = 0):
    def check(n):
        got = [len(a.meta["val"].shape) for a in n.args[first:first + len(ranks)]]
        return None if got == list(ranks) else f"operand ranks {got}, expected {list(ranks)}"
    return check


_COPY = EdgeOp(lambda n: (Op.COPY, [n.args[0]], []))


def _select_lower(n):
    rank = len(n.args[0].meta["val"].shape)
    dim = _nonneg_dim(n.args[1], rank)
    return Op.SELECT, [n.args[0]], [dim, int(n.args[2]) % int(n.args[0].meta["val"].shape[dim])]


def _select_check(n):
    shape = list(n.args[0].meta["val"].shape)
    dim, index = n.args[1], n.args[2]
    if not shape:
        return "select of a rank-0 tensor"
    if not isinstance(dim, int) or not isinstance(index, int) or isinstance(index, bool):
        return "dim and index must be ints"
    if not -len(shape) <= dim < len(shape):
        return f"dim {dim} out of range for rank {len(shape)}"
    size = shape[dim % len(shape)]
    return None if -size <= index < size else f"index {index} out of range for size {size}"


def _eq_scalar_check(n):
    return None if _is_number(n.args[1]) else "the scalar operand must be a number"


def _any_lower(n):
    rank = len(n.args[0].meta["val"].shape)
    return Op.ANY, [n.args[0]], [_nonneg_dim(arg(n, 1, "dim"), rank), int(bool(arg(n, 2, "keepdim", False)))]


def _any_check(n):
    dim, rank = arg(n, 1, "dim"), len(n.args[0].meta["val"].shape)
    if not isinstance(dim, int) or not -max(rank, 1) <= dim < max(rank, 1):
        return f"dim {dim} is not an int in range for rank {rank}"
    return None


def _full_like_check(n):
    if not _is_number(arg(n, 1, "fill_value")):
        return "fill_value must be a number"
    kw = n.kwargs
    if kw.get("dtype") not in (None, FLOAT32):
        return f"dtype {kw.get('dtype')}"
    if kw.get("layout") not in (None, torch.strided):
        return f"layout {kw.get('layout')}"
    if kw.get("device") is not None:
        return f"device {kw.get('device')}"
    if kw.get("pin_memory") not in (None, False):
        return "pin_memory=True"
    if kw.get("memory_format") not in (None, torch.preserve_format):
        return f"memory_format {kw.get('memory_format')}"
    return None

EDGE_OPS: Dict[str, EdgeOp] = {
    "aten.add.Tensor": _binary(Op.ADD, True),
    "aten.sub.Tensor": _binary(Op.SUB, True),
    "aten.mul.Tensor": _binary(Op.MUL, False),
    "aten.div.Tensor": _binary(Op.DIV, False),
    "aten.add.Scalar": _scalar(Op.ADD_SCALAR, lambda s, alpha: s * alpha),
    "aten.sub.Scalar": _scalar(Op.ADD_SCALAR, lambda s, alpha: -(s * alpha)),
    "aten.mul.Scalar": _scalar(Op.MUL_SCALAR, lambda s, alpha: s),
    "aten.div.Scalar": _scalar(Op.MUL_SCALAR, lambda s, alpha: 1.0 / s, divides=True),
    "aten.relu.default": _unary(Op.RELU),
    "aten.gelu.default": EdgeOp(lambda n: (Op.GELU, [n.args[0]], [0 if arg(n, 1, "approximate", "none") == "none"
                                                                   else 1]), _gelu_check),
    "aten.sigmoid.default": _unary(Op.SIGMOID),
    "aten.tanh.default": _unary(Op.TANH),
    "aten.exp.default": _unary(Op.EXP),
    "aten.neg.default": _unary(Op.NEG),
    "aten.sqrt.default": _unary(Op.SQRT),
    "aten.rsqrt.default": _unary(Op.RSQRT),
    "aten.mm.default": EdgeOp(lambda n: (Op.MM, [n.args[0], n.args[1]], []), _ranks(2, 2)),
    "aten.addmm.default": EdgeOp(_addmm_lower, _ranks(2, 2, first=1)),
    "aten.bmm.default": EdgeOp(lambda n: (Op.BMM, [n.args[0], n.args[1]], []), _ranks(3, 3)),
    "aten._softmax.default": EdgeOp(_softmax_lower, _softmax_check),
    "aten.native_layer_norm.default": EdgeOp(_layer_norm_lower, _layer_norm_check),
    "aten.view_copy.default": _COPY,
    "aten.squeeze_copy.default": _COPY,
    "aten.squeeze_copy.dim": _COPY,
    "aten.squeeze_copy.dims": _COPY,
    "aten.unsqueeze_copy.default": _COPY,
    "aten.clone.default": _COPY,
    "dim_order_ops._clone_dim_order.default": _COPY,
    "aten.alias_copy.default": _COPY,
    "aten.permute_copy.default": EdgeOp(_permute_lower),
    "aten.transpose_copy.int": EdgeOp(_transpose_lower),
    "aten.expand_copy.default": EdgeOp(lambda n: (Op.EXPAND, [n.args[0]], [])),
    "aten.select_copy.int": EdgeOp(_select_lower, _select_check),
    "aten.eq.Scalar": EdgeOp(lambda n: (Op.EQ_SCALAR, [n.args[0]], [float(n.args[1])]), _eq_scalar_check,
                             out_dtype=BOOL),
    "aten.logical_not.default": EdgeOp(lambda n: (Op.LOGICAL_NOT, [n.args[0]], []), in_dtypes=(BOOL,),
                                       out_dtype=BOOL),
    "aten.any.dim": EdgeOp(_any_lower, _any_check, in_dtypes=(BOOL,), out_dtype=BOOL),
    # the input only gives the shape: FULL reads nothing
    "aten.full_like.default": EdgeOp(lambda n: (Op.FULL, [], [float(arg(n, 1, "fill_value"))]), _full_like_check),
    "aten.where.self": EdgeOp(lambda n: (Op.WHERE, [n.args[0], n.args[1], n.args[2]], []), in_dtypes=(BOOL,)),
}


def _tensor_vals(x: Any) -> List[Any]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for e in x for t in _tensor_vals(e)]
    return []


def _static_float32(val: Any, what: str) -> Optional[str]:
    return _static_tensor(val, what, FLOAT32)


def _static_tensor(val: Any, what: str, dtype: torch.dtype) -> Optional[str]:
    if not isinstance(val, torch.Tensor):
        return f"{what} is not a tensor"
    if val.dtype != dtype:
        return f"{what} has dtype {val.dtype} ({dtype} is supported here)"
    if not all(isinstance(s, int) for s in val.shape):
        return f"{what} has a dynamic shape {list(val.shape)}"
    if val.dim() > MAX_RANK:
        return f"{what} has rank {val.dim()} > {MAX_RANK}"
    return None


def unsupported_reason(node: torch.fx.Node) -> Optional[str]:
    """None when `node` can be lowered into the payload, else why not."""
    if node.op != "call_function":
        return f"{node.op} node"
    if node.target is operator.getitem:
        src = node.args[0]
        if not isinstance(src, torch.fx.Node) or op_name(src.target) not in EDGE_OPS:
            return "getitem of an unsupported node"
        return unsupported_reason(src)
    name = op_name(node.target)
    if name not in EDGE_OPS:
        return f"op {name or node.target} is not in the CUDA delegate's op table"
    spec = EDGE_OPS[name]
    outs = node.meta.get("val")
    out_vals = _tensor_vals(outs)
    if not out_vals:
        return "no output tensor metadata"
    for k, v in enumerate(out_vals):
        if (r := _static_tensor(v, f"output {k}", spec.out_dtype)) is not None:
            return r
    operands = [x for a in list(node.args) + list(node.kwargs.values())
                for x in (a if isinstance(a, (list, tuple)) else [a]) if isinstance(x, torch.fx.Node)]
    for k, x in enumerate(operands):
        want = spec.in_dtypes[k] if k < len(spec.in_dtypes) else FLOAT32
        if (r := _static_tensor(x.meta.get("val"), f"input {x.name}", want)) is not None:
            return r
    check = spec.check
    return check(node) if check is not None else None


def lower(node: torch.fx.Node) -> Tuple[Op, List[Optional[torch.fx.Node]], List[float]]:
    name = op_name(node.target)
    if name not in EDGE_OPS:
        raise NotImplementedError(f"EtrtCudaBackend: node {node.name}: op {name or node.target} is not supported")
    reason = unsupported_reason(node)
    if reason is not None:
        raise NotImplementedError(f"EtrtCudaBackend: node {node.name} ({name}): {reason}")
    return EDGE_OPS[name].lower(node)


__all__: Sequence[str] = ["EDGE_OPS", "op_name", "unsupported_reason", "lower", "arg"]
