"""The public `executorch.runtime` API (Runtime, Program, Method, the backend and operator registries) over this
package's `portable_lib`, so that code written against upstream's `executorch.runtime` keeps working.

    from executorch.runtime import Runtime
    program = Runtime.get().load_program("model.pte")
    outputs = program.load_method("forward").execute([x])
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Set, Union

from executorch_portable_lib import portable_lib as _lib
from executorch_portable_lib.portable_lib import ExecuTorchMethod, ExecuTorchProgram, MethodMeta, Verification

__all__ = ["BackendRegistry", "Method", "MethodMeta", "OperatorRegistry", "Program", "Runtime", "Verification"]


class Method:
    """One loaded method of a Program. Its memory is its own: two Method objects never share arenas."""

    def __init__(self, method: ExecuTorchMethod) -> None:
        self._method = method

    def execute(self, inputs: Sequence[Any]) -> Sequence[Any]:
        """Runs the method on `inputs` (any mix of the input kinds portable_lib accepts) and returns its outputs."""
        return self._method(inputs)

    @property
    def metadata(self) -> MethodMeta:
        return self._method.method_meta()


class Program:
    """A loaded program. Methods are loaded on first use and then reused."""

    def __init__(self, program: ExecuTorchProgram, data: Optional[bytes]) -> None:
        self._program = program
        # portable_lib keeps a buffer it was loaded from alive itself; holding it here too costs nothing and keeps
        # the object the caller passed reachable for as long as the program is.
        self._data = data
        self._methods: Dict[str, Method] = {}
        self.method_names: Set[str] = {program.get_method_name(i) for i in range(program.num_methods())}

    def load_method(self, name: str) -> Optional[Method]:
        """The method called `name`, loaded once per Program. Unknown names raise RuntimeError naming the methods
        the program has."""
        method = self._methods.get(name)
        if method is None:
            method = Method(self._program.load_method(name))
            self._methods[name] = method
        return method

    def metadata(self, method_name: str) -> MethodMeta:
        return self._program.method_meta(method_name)

    def write_etdump_result_to_file(self, etdump_path: str, debug_buffer_path: Optional[str] = None) -> None:
        self._program.write_etdump_result_to_file(etdump_path, debug_buffer_path)


class BackendRegistry:
    """The delegate backends compiled into these bindings."""

    @property
    def registered_backend_names(self) -> List[str]:
        return list(_lib._get_registered_backend_names())

    def is_available(self, backend_name: str) -> bool:
        return bool(_lib._is_available(backend_name))


class OperatorRegistry:
    """The operators (kernel keys such as "aten::add.out") these bindings can run."""

    @property
    def operator_names(self) -> Set[str]:
        return set(_lib._get_operator_names())


class Runtime:
    """The process-wide entry point; use Runtime.get()."""

    @staticmethod
    @functools.lru_cache(maxsize=1)
    def get() -> "Runtime":
        return Runtime()

    def __init__(self) -> None:
        self.backend_registry = BackendRegistry()
        self.operator_registry = OperatorRegistry()

    def load_program(self, data: Union[bytes, bytearray, BinaryIO, Path, str], *,
                     verification: Verification = Verification.InternalConsistency, enable_etdump: bool = False,
                     debug_buffer_size: int = 0, data_path: Optional[str] = None) -> Program:
        """Loads a program from a path, bytes-like data or a binary file object."""
        options = dict(enable_etdump=enable_etdump, debug_buffer_size=debug_buffer_size,
                       program_verification=verification, data_path=data_path)
        if isinstance(data, (str, Path, os.PathLike)):
            return Program(_lib._load_program(os.fspath(data), **options), None)
        if hasattr(data, "read"):
            data = data.read()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"load_program: expected a path, bytes-like data or a binary file, got "
                            f"{type(data).__name__}")
        return Program(_lib._load_program_from_buffer(data, **options), data)
