"""executorch_portable_lib: a header-only C++20 ExecuTorch runtime (no ATen, no libtorch) and its Python bindings.

Import it as upstream's names: `from executorch.extension.pybindings import portable_lib`, `executorch.runtime`
(see _upstream_names for how those names reach this package without touching the exporter's files).
"""
from executorch_portable_lib._upstream_names import install as _install

_install()
