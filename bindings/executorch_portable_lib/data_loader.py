"""PyDataLoader: a source of program bytes for portable_lib._load_for_executorch_from_data_loader.

The type is registered by the compiled extension (_C) and re-exported here, where upstream ExecuTorch defines it, so
that it exists exactly once however it is first imported. C++ extensions make loaders over their own data sources
with the header etrt/adapters/data_loader.h.
"""

from executorch_portable_lib._C import PyDataLoader  # noqa: F401

__all__ = ["PyDataLoader"]
