"""executorch_portable_lib: a header-only C++20 ExecuTorch runtime (no ATen, no libtorch) and its Python bindings.

Import it as upstream's names: `from executorch.extension.pybindings import portable_lib`, `executorch.runtime`
(see _upstream_names for how those names reach this package without touching the exporter's files).

For C++ embedding, get_include() is the include directory of the runtime's headers and of the generated kernel
table; get_pkgconfig_dir() and get_cmake_dir() hold the pkg-config and CMake files that describe it. The command
line tool (`etrt`, or `python -m executorch_portable_lib`) prints them: `etrt config --cflags`.
"""
# This module is imported at every interpreter start (the .pth file): it imports nothing beyond the finder.
from executorch_portable_lib._upstream_names import install as _install

_install()


def _here() -> str:
    import os

    return os.path.dirname(os.path.abspath(__file__))


def get_include() -> str:
    """The directory to add to the include path: <etrt/runtime.h> and <etrt_generated/portable_kernels.h>."""
    import os

    return os.path.join(_here(), "include")


def get_pkgconfig_dir() -> str:
    """The directory holding executorch-portable-lib.pc (add it to PKG_CONFIG_PATH)."""
    import os

    return os.path.join(_here(), "lib", "pkgconfig")


def get_cmake_dir() -> str:
    """The directory for CMAKE_PREFIX_PATH (find_package(executorch-portable-lib CONFIG))."""
    import os

    return os.path.join(_here(), "lib", "cmake")
