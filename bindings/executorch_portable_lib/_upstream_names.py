"""Serves this package under the module names users import, without writing into another distribution's files.

Users write `from executorch.extension.pybindings import portable_lib` (and `...pybindings.data_loader`,
`executorch.runtime`). The exporter (`pip install executorch`) ships files under those same names; installing this
package beside it must neither overwrite nor, on uninstall, delete them. So the implementation lives under its own
name, `executorch_portable_lib`, and the path-configuration file `executorch_portable_lib.pth` (run by `site` at
interpreter start) installs the finder below at the front of `sys.meta_path`:

- the three module names resolve to this package's modules, ahead of any file on sys.path (so with the exporter
  installed, exporting uses its code and running uses this runtime, in one process);
- the parent packages (`executorch`, `executorch.extension`, `executorch.extension.pybindings`) stay the exporter's
  when it is installed; without it they are empty namespace packages.

Uninstalling this package removes the .pth file and with it the finder: the exporter's modules are found again,
untouched. Uninstalling the exporter leaves this package working. An interpreter started without `site` (python -S)
gets the names after `import executorch_portable_lib`.
"""
from __future__ import annotations  # annotations stay strings: nothing here imports typing at start-up

import importlib
import importlib.machinery
import sys

ALIASES = {
    "executorch.extension.pybindings.portable_lib": "executorch_portable_lib.portable_lib",
    "executorch.extension.pybindings.data_loader": "executorch_portable_lib.data_loader",
    "executorch.runtime": "executorch_portable_lib.runtime",
}
PARENTS = ("executorch", "executorch.extension", "executorch.extension.pybindings")


class _AliasLoader:
    """Binds an upstream name to the already-imported module of this package (one module object, two names)."""

    def __init__(self, target: str) -> None:
        self._target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> object:
        module = importlib.import_module(self._target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: object) -> None:
        # The import system stamped the alias's spec on the module; the module keeps its own (reload, pickling).
        module.__spec__ = self._spec  # type: ignore[attr-defined]


class UpstreamNames:
    """A meta-path finder (the protocol needs only find_spec; the ABCs would cost start-up time in every process)."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> "importlib.machinery.ModuleSpec | None":
        alias = ALIASES.get(fullname)
        if alias is not None:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(alias))
        if fullname not in PARENTS:
            return None
        for finder in sys.meta_path:  # the exporter's package, when it is installed
            find = getattr(finder, "find_spec", None)
            if finder is self or isinstance(finder, UpstreamNames) or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                return spec
        return importlib.machinery.ModuleSpec(fullname, None, is_package=True)  # an empty namespace package


def install() -> None:
    """Puts the finder first on sys.meta_path (once per interpreter)."""
    if not any(isinstance(f, UpstreamNames) for f in sys.meta_path):
        sys.meta_path.insert(0, UpstreamNames())
