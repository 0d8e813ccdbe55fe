"""PyDataLoader: a source of program bytes for portable_lib._load_for_executorch_from_data_loader."""
import os
from typing import Any, Protocol, Union

__all__ = ["PyDataLoader"]

class _Reader(Protocol):
    def read(self, offset: int, size: int) -> Any:
        """Returns a bytes-like object (bytes, bytearray, memoryview, ...) holding exactly `size` bytes of the
        source from `offset` on."""
        ...

class PyDataLoader:
    """A source of program bytes. Upstream's class has no Python constructor (C++ extensions make it); these named
    constructors are additions. A C++ extension makes one over its own etrt::DataSource with
    PyDataLoader::from_source / from_function (etrt/adapters/data_loader.h). One loader may serve any number of
    loads, and every ExecuTorchModule loaded from it keeps it alive."""

    @staticmethod
    def from_path(path: Union[str, os.PathLike[str]]) -> "PyDataLoader":
        """The file, mapped read-only now, as _load_for_executorch maps it. A file that cannot be opened raises
        RuntimeError here."""
        ...
    @staticmethod
    def from_buffer(buffer: Any) -> "PyDataLoader":
        """Any bytes-like object (C-contiguous buffer protocol), kept alive (and, for a bytearray, unresizable) as
        long as the loader. A read-only buffer (bytes, a read-only memoryview or mmap) is read in place by every
        load, so it must not change while a module uses it; a writable one (bytearray, NumPy array) is copied at each
        load. Anything else raises TypeError."""
        ...
    @staticmethod
    def from_reader(reader: _Reader, size: int) -> "PyDataLoader":
        """A custom source (a file decompressed or fetched by Python): each load calls reader.read(offset, n) to read
        bytes [0, size) in order, in chunks of at most 16 MiB, into memory the loaded program owns; `size` is the
        source's length in bytes. A read that raises (an Exception), returns something that is not bytes-like, or
        returns another number of bytes than asked fails the load with RuntimeError naming the call
        ("read(0, 1024) returned 10 bytes, expected 1024 (short read ...)"); KeyboardInterrupt and other
        BaseExceptions propagate unchanged. The reader is kept alive with the loader and is called with the GIL
        held. TypeError when reader has no callable read or size is not an int; ValueError when size < 0."""
        ...
