"""The ExecuTorch portable runtime bindings.

Loads and runs ExecuTorch programs (.pte) and bundled programs (.bpte). Inputs may be NumPy arrays or any
buffer-protocol object, torch tensors, DLPack producers or capsules. Outputs are torch tensors when torch imports,
otherwise ExecuTorchResult objects (buffer protocol + DLPack); set EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=executorch
before importing to always get ExecuTorchResult. The compiled extension imports torch itself when the output mode
needs it; it never links against libtorch.
"""

from executorch_portable_lib._C import (  # noqa: F401
    BundledModule,
    ExecuTorchFileNotFoundError,
    ExecuTorchMethod,
    ExecuTorchModule,
    ExecuTorchProgram,
    ExecuTorchResult,
    MethodMeta,
    TensorInfo,
    Verification,
    _cpu_isa,
    _create_profile_block,
    _cuda_enabled,
    _device_wait_count,
    _dump_profile_results,
    _get_operator_names,
    _get_registered_backend_names,
    _is_available,
    _load_bundled_program_from_buffer,
    _load_for_executorch,
    _load_for_executorch_from_buffer,
    _load_for_executorch_from_bundled_program,
    _load_for_executorch_from_data_loader,
    _load_program,
    _load_program_from_buffer,
    _reset_profile_results,
    _set_log_level,
    _testing_emulate_cuda,
    _testing_emulated_counters,
    _threadpool_get_thread_count,
    _unsafe_reset_threadpool,
)
from executorch_portable_lib._C import _output_mode  # noqa: F401
