"""Export side of the project's CUDA delegate (backend id `EtrtCudaBackend`, payload format ECU1).

    from etrt_cuda import EtrtCudaPartitioner
    to_edge_transform_and_lower(exported, partitioner=[EtrtCudaPartitioner()])

Modules: ops (edge-op table), payload (ECU1 writer/reader), backend (preprocess), partitioner, reference
(NumPy interpreter of a payload). See include/etrt/backends/cuda/PAYLOAD.md for the format.
"""
from .backend import BACKEND_ID, EtrtCudaBackend, build_payload
from .partitioner import EtrtCudaPartitioner
from .payload import Op, Payload, PayloadError
from . import reference

__all__ = ["BACKEND_ID", "EtrtCudaBackend", "EtrtCudaPartitioner", "Op", "Payload", "PayloadError",
           "build_payload", "reference"]
