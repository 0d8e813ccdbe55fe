// PyDataLoader: what _load_for_executorch_from_data_loader reads a program from. Python sees it as
// executorch.extension.pybindings.data_loader.PyDataLoader.
//
// From Python (named constructors; upstream's class has none, only C++ extensions make one):
//   PyDataLoader.from_path("model.pte")      # mapped read-only now; a missing file raises here
//   PyDataLoader.from_buffer(data)           # any bytes-like object, kept alive; read in place when read-only
//   PyDataLoader.from_reader(reader, size)   # reader.read(offset, n) -> bytes-like, called at each load
//
// From a downstream pybind11 extension, over its own DataSource (e.g. a file it decompresses):
//   #include <etrt/adapters/data_loader.h>
//   PYBIND11_MODULE(my_loaders, m) {
//     etrt::python::import_data_loader_type();  // OK: the type is registered by _C, once
//     m.def("open_packed", [](std::string path) {
//       return etrt::python::PyDataLoader::from_function(
//           etrt::cat("packed file '", path, "'"),
//           [path]() -> etrt::Result<std::shared_ptr<const etrt::DataSource>> {
//             std::vector<uint8_t> bytes;  // ... unpack `path` into `bytes`; return etrt::fail(...) on error
//             return etrt::DataSource::copy_of(bytes);
//           });
//     });
//   }
//   // Wrong: py::class_<etrt::python::PyDataLoader, ...>(m, "PyDataLoader") raises "already registered" on import.
// pybind11 shares a registered type only between modules built with the same pybind11 internals version, compiler
// and C++ standard library: build the extension the way the bindings are built.
//
// Note [one registration]: the type is registered by _C (its surface, gen/surface.toml) and the
// pure-Python module executorch.extension.pybindings.data_loader re-exports it, so importing either registers it
// exactly once. (Upstream registers it in a separate extension that _C imports at init; ours has no second binary.)
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>

#include "etrt/core/result.h"
#include "etrt/program/data_source.h"

namespace etrt::python {

namespace py = pybind11;

/// A source of program bytes for _load_for_executorch_from_data_loader. Immutable once made, so one loader may
/// serve any number of loads (each ExecuTorchModule keeps its loader alive).
class PyDataLoader {
 public:
  /// Makes the program bytes for one load. Runs with the GIL held; a function doing long work that touches no
  /// Python object may release it (py::gil_scoped_release). Its failures become the load's RuntimeError.
  using OpenFn = std::function<Result<std::shared_ptr<const DataSource>>()>;

  /// A loader over bytes that exist already (a mapped file, a buffer); every load shares them.
  /// @param description How errors and repr() name this loader, e.g. "path='model.pte'".
  static std::shared_ptr<PyDataLoader> from_source(std::shared_ptr<const DataSource> source, std::string description) {
    auto l = std::shared_ptr<PyDataLoader>(new PyDataLoader(std::move(description)));
    l->open_ = [source = std::move(source)]() -> Result<std::shared_ptr<const DataSource>> { return source; };
    return l;
  }

  /// A loader that makes its bytes at each load (reads them, decompresses them, ...).
  static std::shared_ptr<PyDataLoader> from_function(std::string description, OpenFn open) {
    auto l = std::shared_ptr<PyDataLoader>(new PyDataLoader(std::move(description)));
    l->open_ = std::move(open);
    return l;
  }

  /// The bytes for one load. Call with the GIL held.
  /// @retval the OpenFn's failure, with this loader's description in front of its message.
  Result<std::shared_ptr<const DataSource>> open() const {
    if (!open_) return fail(Error::InvalidState, repr(), ": the loader has no open function");
    auto r = open_();
    if (!r) return fail(r.error().code, repr(), ": ", r.error().what);
    if (!*r) return fail(Error::Internal, repr(), ": the open function returned no data");
    return std::move(*r);
  }

  const std::string& description() const { return description_; }
  std::string repr() const { return cat("PyDataLoader(", description_, ")"); }

 private:
  explicit PyDataLoader(std::string description) : description_(std::move(description)) {}
  std::string description_;
  OpenFn open_;
};

/// Imports the module that registers PyDataLoader (Note [one registration]). A downstream extension calls it in
/// its PYBIND11_MODULE before it returns any PyDataLoader.
inline void import_data_loader_type() { py::module_::import("executorch_portable_lib.data_loader"); }

namespace detail {

/// Whether the interpreter can still take the GIL: not once it is finalizing (taking it would never return).
inline bool python_usable() {
  if (!Py_IsInitialized()) return false;
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsFinalizing();
#else
  return !_Py_IsFinalizing();
#endif
}

/// A shared_ptr over `p` whose release takes the GIL, since the last owner may be any thread (a DLPack consumer
/// freeing a result frees the program state). At interpreter shutdown the object is leaked instead.
template <class T>
std::shared_ptr<T> gil_released(T* p) {
  return std::shared_ptr<T>(p, [](T* q) {
    if (!python_usable()) return;  // leaked: the process is ending
    py::gil_scoped_acquire gil;
    delete q;
  });
}

inline std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

/// "ValueError: message", without the traceback pybind11's what() may append.
inline std::string exception_text(const py::error_already_set& e) {
  std::string text = py::str(e.type().attr("__name__"));
  if (const std::string msg = py::str(e.value()); !msg.empty()) text += ": " + msg;
  return text;
}

/// A held buffer export: the object stays alive and a bytearray cannot be resized while it exists.
struct BufferExport {
  Py_buffer view{};
  bool held = false;
  ~BufferExport() {
    if (held) PyBuffer_Release(&view);
  }
  std::span<const uint8_t> bytes() const {
    return {static_cast<const uint8_t*>(view.buf), static_cast<size_t>(view.len)};
  }
};

/// Exports `obj` as contiguous bytes, or returns the reason it cannot be.
inline std::unique_ptr<BufferExport> export_bytes(py::handle obj, std::string& why_not) {
  auto e = std::make_unique<BufferExport>();
  if (PyObject_GetBuffer(obj.ptr(), &e->view, PyBUF_SIMPLE) != 0) {
    py::error_already_set err;  // takes (clears) the Python error
    why_not = exception_text(err);
    return nullptr;
  }
  e->held = true;
  return e;
}

}  // namespace detail

/// A path argument given as str or os.PathLike.
inline std::string path_from_python(py::handle path, const char* what) {
  py::object p = py::reinterpret_borrow<py::object>(path);
  if (!py::isinstance<py::str>(p) && py::hasattr(p, "__fspath__")) p = py::module_::import("os").attr("fspath")(p);
  if (!py::isinstance<py::str>(p))
    throw py::type_error(cat(what, " must be a str or os.PathLike of str, got ", detail::type_name(path)));
  return p.cast<std::string>();
}

/// Reads of a Python reader are at most this long, so a large program is never held twice in memory.
inline constexpr size_t kReaderChunkBytes = size_t{16} << 20;

/// PyDataLoader.from_path: maps the file now (as _load_for_executorch does), so a missing file raises here.
inline std::shared_ptr<PyDataLoader> loader_from_path(py::handle path) {
  const std::string p = path_from_python(path, "PyDataLoader.from_path: path");
  auto src = DataSource::from_file(p);
  if (!src) throw std::runtime_error(cat("PyDataLoader.from_path: ", src.error().describe()));
  return PyDataLoader::from_source(std::move(*src), cat("path='", p, "'"));
}

/// PyDataLoader.from_buffer: keeps `buffer` exported (alive) for the loader's lifetime. A read-only buffer (bytes,
/// a read-only memoryview or mmap) is read in place by every load; a writable one is copied at each load, so
/// writes after a load cannot reach a loaded program.
inline std::shared_ptr<PyDataLoader> loader_from_buffer(py::handle buffer) {
  std::string why;
  auto exported = detail::export_bytes(buffer, why);
  if (!exported)
    throw py::type_error(cat("PyDataLoader.from_buffer: expected a bytes-like object (C-contiguous buffer), got ",
                             detail::type_name(buffer), ": ", why));
  const bool read_only = exported->view.readonly != 0;
  const size_t n = static_cast<size_t>(exported->view.len);
  std::string desc = cat(detail::type_name(buffer), " of ", n, " bytes", read_only ? "" : ", copied at each load");
  std::shared_ptr<const detail::BufferExport> held = detail::gil_released(exported.release());
  return PyDataLoader::from_function(std::move(desc),
                                     [held, read_only]() -> Result<std::shared_ptr<const DataSource>> {
                                       if (read_only) return DataSource::borrow(held->bytes(), held);
                                       return DataSource::copy_of(held->bytes());
                                     });
}

namespace detail {

/// One chunk of a Python reader: read(offset, n) must return a bytes-like object of exactly n bytes.
inline Status read_chunk(py::handle reader, size_t offset, size_t n, uint8_t* dst, size_t total) {
  const auto call = cat("read(", offset, ", ", n, ")");
  py::object got;
  try {
    got = reader.attr("read")(offset, n);
  } catch (py::error_already_set& e) {
    // KeyboardInterrupt, SystemExit and other non-Exception errors are the user's, not a data error: re-raised.
    if (!e.matches(PyExc_Exception)) throw;
    return fail(Error::AccessFailed, call, " raised ", exception_text(e));
  }
  std::string why;
  auto exported = export_bytes(got, why);
  if (!exported)
    return fail(Error::AccessFailed, call, " returned ", type_name(got), ", expected a bytes-like object of ", n,
                " bytes");
  const size_t len = static_cast<size_t>(exported->view.len);
  if (len != n)
    return fail(Error::AccessFailed, call, " returned ", len, " bytes, expected ", n,
                len < n ? cat(" (short read: the size given, ", total, ", must be the source's size in bytes)")
                        : std::string());
  std::memcpy(dst, exported->view.buf, n);
  return {};
}

}  // namespace detail

/// PyDataLoader.from_reader: each load reads [0, size) through reader.read(offset, n), in order, in chunks of at
/// most kReaderChunkBytes, into memory the loaded program owns. The reader is kept alive with the loader.
inline std::shared_ptr<PyDataLoader> loader_from_reader(py::handle reader, py::handle size) {
  const py::object read = py::getattr(reader, "read", py::none());
  if (read.is_none() || !PyCallable_Check(read.ptr()))
    throw py::type_error(cat("PyDataLoader.from_reader: reader must have a method read(offset, size), got ",
                             detail::type_name(reader)));
  if (!PyLong_Check(size.ptr()) || PyBool_Check(size.ptr()))
    throw py::type_error(cat("PyDataLoader.from_reader: size must be an int, got ", detail::type_name(size)));
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(size.ptr(), &overflow);
  if (overflow != 0 || n < 0)
    throw py::value_error(cat("PyDataLoader.from_reader: size must be a byte count >= 0, got ",
                              std::string(py::str(size))));
  const auto total = static_cast<size_t>(n);
  std::shared_ptr<const py::object> held =
      detail::gil_released(new py::object(py::reinterpret_borrow<py::object>(reader)));
  std::string desc = cat("reader=", detail::type_name(reader), ", size=", total);
  return PyDataLoader::from_function(std::move(desc), [held, total]() -> Result<std::shared_ptr<const DataSource>> {
    if (total == 0) return DataSource::copy_of({});
    // Aligned as DataSource wants program bytes (so borrow() below does not copy them again).
    auto* raw = static_cast<uint8_t*>(::operator new(total, std::align_val_t{64}, std::nothrow));
    if (!raw) return fail(Error::MemoryAllocationFailed, "cannot allocate ", total, " bytes for the program");
    std::shared_ptr<uint8_t> mem(raw, [](uint8_t* p) { ::operator delete(p, std::align_val_t{64}); });
    for (size_t off = 0; off < total; off += kReaderChunkBytes)
      ETRT_CHECK_OK(detail::read_chunk(*held, off, std::min(kReaderChunkBytes, total - off), raw + off, total));
    return DataSource::borrow({raw, total}, std::move(mem));
  });
}

}  // namespace etrt::python
