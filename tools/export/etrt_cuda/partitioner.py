"""`EtrtCudaPartitioner`: tags the float32, static-shape nodes the CUDA delegate supports (ops.EDGE_OPS).

Partitions come from torch.fx's CapabilityBasedPartitioner; each one is lowered by `EtrtCudaBackend` with the
CompileSpec `target_device` = b"cuda:<index>", which executorch's PropagateDevicePass reads to place the
delegate's arguments on the device (and insert et_copy::_h2d_copy / _d2h_copy around it).
"""
from __future__ import annotations

from typing import Dict, Mapping

import torch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import ops
from .backend import BACKEND_ID, EtrtCudaBackend  # noqa: F401  (importing registers the backend by class name)

TARGET_DEVICE_KEY = "target_device"


class EtrtCudaOperatorSupport(OperatorSupportBase):
    """Accepts the nodes `ops.unsupported_reason` finds nothing against; remembers why others were refused."""

    def __init__(self) -> None:
        super().__init__()
        self.rejected: Dict[str, str] = {}

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node) -> bool:
        reason = ops.unsupported_reason(node)
        if reason is not None and node.op == "call_function":
            self.rejected[node.name] = reason
        return reason is None


class EtrtCudaPartitioner(Partitioner):
    def __init__(self, device_index: int = 0) -> None:
        super().__init__()
        self.device_index = int(device_index)
        self.delegation_spec = DelegationSpec(
            BACKEND_ID, [CompileSpec(TARGET_DEVICE_KEY, f"cuda:{self.device_index}".encode())])
        self.last_rejected: Dict[str, str] = {}   # node name -> why it stayed out (last partition() call)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        support = EtrtCudaOperatorSupport()
        partitioner = CapabilityBasedPartitioner(
            exported_program.graph_module, support, allows_single_node_partition=True)
        tags: Dict[str, DelegationSpec] = {}
        for partition in partitioner.propose_partitions():
            tag = f"etrt_cuda_{partition.id}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
            tags[tag] = self.delegation_spec
        # Parameters/buffers/constants consumed by tagged nodes join the partition and are embedded in the
        # payload. A constant also used outside is duplicated by to_backend (the CPU side gets `<name>_copy_0`);
        # leaving it untagged instead would make it a delegate argument, and executorch 1.5.1 then fails in
        # to_executorch (the _h2d_copy of a constant placeholder gets a const spec without storage).
        tag_constant_data(exported_program)
        self.last_rejected = support.rejected
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
