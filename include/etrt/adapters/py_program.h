// ExecuTorchProgram, ExecuTorchModule and BundledModule, and how program bytes and data files are loaded.
#pragma once

#include <pybind11/pybind11.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "etrt/adapters/py_method.h"

namespace etrt::python {

namespace py = pybind11;

// ---- ExecuTorchProgram / ExecuTorchModule ---------------------------------------------------------------------

/// Opens `path` for writing, with upstream's message on failure.
inline std::FILE* open_for_write(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error(cat("Failed to open file ", path, ": ", std::strerror(errno)));
  return f;
}

/// Writes the ETDump recorded since the previous write (upstream semantics: each write holds the newer runs) and,
/// given `dbg_path` and a debug buffer, the whole debug buffer: all debug_buffer_size bytes, as upstream writes it,
/// so the offsets in the .etdp index the file. The buffer is then reused from offset 0 (Note [debug buffer
/// overflow]). Without a debug buffer, `dbg_path` is ignored with a log line.
inline void write_etdump(ProgramState& ps, const std::string& path, std::optional<std::string> dbg_path) {
  if (!ps.etdump) throw std::runtime_error("No etdump found");
  if (dbg_path && ps.etdump->debug_buffer_size() == 0) {
    log(LogLevel::Info, cat("debug_buffer_path '", *dbg_path, "' is not written: this program was loaded without a "
                            "debug buffer (pass debug_buffer_size > 0 with enable_etdump=True)"));
    dbg_path.reset();
  }
  std::FILE* f = open_for_write(path);
  std::FILE* d = nullptr;
  if (dbg_path) {
    d = std::fopen(dbg_path->c_str(), "wb");
    if (!d) {
      const int err = errno;
      std::fclose(f);
      throw std::runtime_error(cat("Failed to open file ", *dbg_path, ": ", std::strerror(err)));
    }
  }
  std::string error;
  bool closed = true, dbg_closed = true;
  {
    py::gil_scoped_release release;  // a debug buffer can be large; executions on other threads keep running
    error = ps.etdump->take([&](std::span<const uint8_t> etdp, std::span<const uint8_t> buffer) -> std::string {
      if (std::fwrite(etdp.data(), 1, etdp.size(), f) != etdp.size())
        return cat("Failed to write etdump to file ", path);
      if (d && std::fwrite(buffer.data(), 1, buffer.size(), d) != buffer.size())
        return cat("Failed to write debug buffer to file ", *dbg_path);
      return {};
    });
    closed = std::fclose(f) == 0;
    if (d) dbg_closed = std::fclose(d) == 0;
  }
  if (!error.empty()) throw std::runtime_error(error);
  if (!closed) throw std::runtime_error(cat("Failed to close etdump file ", path));
  if (!dbg_closed) throw std::runtime_error(cat("Failed to close debug buffer file ", *dbg_path));
}

inline std::shared_ptr<ProgramState> make_program_state(std::shared_ptr<const DataSource> src,
                                                        std::shared_ptr<const DataSource> data_src,
                                                        Verification verification, bool etdump,
                                                        size_t debug_buffer_size,
                                                        std::span<const KernelEntry> kernels,
                                                        uint64_t max_planned_bytes = 0) {
  auto ps = std::make_shared<ProgramState>();
  ps->max_planned_bytes = max_planned_bytes;
  ps->data_source = data_src;
  if (BundledProgram::is_bundled(src->bytes())) {  // a .bpte: run its embedded program
    auto bp = BundledProgram::load(src);
    if (!bp) raise_logged(bp.error());
    src = (*bp)->program_source();
  }
  ps->source = src;
  ps->kernels = kernels;
  DeviceRuntime& rt = device_runtime();
  rt.lock();  // the device layer and the backend list are fixed from the first program on
  ps->backends = rt.backends();
  ps->cuda = rt.cuda();
  ps->enable_etdump = etdump;
  // Upstream: the debug buffer (intermediate outputs) exists only with enable_etdump; alone it is ignored.
  if (etdump)
    ps->etdump = std::make_shared<etdump::ETDumpRecorder>(check(etdump::DebugBuffer::allocate(debug_buffer_size)));
  else if (debug_buffer_size > 0)
    log(LogLevel::Info, cat("debug_buffer_size=", debug_buffer_size,
                            " has no effect without enable_etdump=True (intermediate outputs go into the ETDump)"));
  {
    py::gil_scoped_release release;
    auto prog = Program::load(src, verification);
    if (!prog) {
      py::gil_scoped_acquire acquire;
      raise_logged(prog.error());
    }
    ps->program = std::move(*prog);
    if (data_src) {
      auto dm = FlatTensorData::load(data_src);
      if (dm) {
        ps->data_map = std::move(*dm);
      } else {
        Failure f = dm.error();
        f.what = cat("the external data (.ptd) cannot be read: ", f.what);
        ps->data_error = std::move(f);
      }
    }
  }
  return ps;
}

/// Files up to this size are read into memory when the caller leaves the choice to us (Note [mapped files]).
inline constexpr uint64_t kReadIntoMemoryBytes = uint64_t{16} << 20;

/// A file mapped in place (`mmap` true), read into memory (false) or, when `mmap` is None, read if it is at most
/// kReadIntoMemoryBytes and mapped otherwise (Note [mapped files]): a small file costs nothing to copy and then
/// needs no check per call; a large one is read in place, where one check per call is negligible.
inline std::shared_ptr<const DataSource> source_from_path(const std::string& path, std::optional<bool> mmap = {}) {
  bool map = true;
  if (mmap) {
    map = *mmap;
  } else {
    struct stat st {};
    map = ::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) > kReadIntoMemoryBytes;
  }
  auto src = map ? DataSource::from_file(path) : DataSource::read_file(path);
  if (!src) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) raise_missing_file(path, src.error());
    raise_logged(src.error());
  }
  return std::move(*src);
}
inline std::shared_ptr<const DataSource> source_from_bytes(py::handle buffer) {
  // The bytes are copied into storage the program owns, so the caller's object may go away (upstream #10725).
  py::buffer_info info = py::reinterpret_borrow<py::buffer>(buffer).request();
  return DataSource::copy_of({static_cast<const uint8_t*>(info.ptr), static_cast<size_t>(info.size * info.itemsize)});
}

class PyProgram {
 public:
  explicit PyProgram(std::shared_ptr<ProgramState> ps) : ps_(std::move(ps)) {}
  size_t num_methods() const { return ps_->program->num_methods(); }
  std::string get_method_name(size_t i) const { return std::string(check(ps_->program->get_method_name(i))); }
  std::shared_ptr<PyMethod> load_method(const std::string& name) { return PyMethod::load(ps_, name); }
  PyMethodMeta method_meta(const std::string& name) const {
    check(ps_->check_files());
    return PyMethodMeta{check(ps_->program->method_meta(name)), ps_};
  }
  bool has_etdump() const { return ps_->enable_etdump; }
  const std::shared_ptr<ProgramState>& state() const { return ps_; }

 private:
  std::shared_ptr<ProgramState> ps_;
};

class PyModule {
 public:
  /// @param loader What the program was read from, kept alive with the module (a PyDataLoader); may be null.
  explicit PyModule(std::shared_ptr<ProgramState> ps, std::shared_ptr<const void> loader = nullptr)
      : loader_(std::move(loader)), ps_(std::move(ps)) {}

  PyMethod& method(const std::string& name) {
    std::lock_guard<std::mutex> g(mu_);  // held briefly, never across a GIL acquire
    auto it = methods_.find(name);
    if (it != methods_.end()) return *it->second;
    if (!ps_->program->has_method(name)) raise(ps_->program->unknown_method(name));
    auto m = PyMethod::load(ps_, name, /*module_method=*/true);
    return *methods_.emplace(name, std::move(m)).first->second;
  }

  py::list run_method(const std::string& name, py::handle inputs, bool clone) {
    return method(name).call(inputs, clone);
  }
  py::list plan_execute(const std::string& name, bool clone) { return method(name).run_without_inputs(clone); }
  PyMethodMeta method_meta(const std::string& name) const {
    check(ps_->check_files());
    return PyMethodMeta{check(ps_->program->method_meta(name)), ps_};
  }
  std::vector<std::string> method_names() const { return ps_->program->method_names(); }
  bool has_etdump() const { return ps_->enable_etdump; }
  const std::shared_ptr<ProgramState>& state() const { return ps_; }

 private:
  std::shared_ptr<const void> loader_;  // declared first: destroyed after the program read from it
  std::shared_ptr<ProgramState> ps_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<PyMethod>> methods_;
};

class PyBundledModule {
 public:
  PyBundledModule(std::shared_ptr<const BundledProgram> bp, std::shared_ptr<ProgramState> ps)
      : bundle_(std::move(bp)), module_(std::move(ps)) {}

  py::list verify(const std::string& method_name, size_t index, double rtol, double atol) {
    PyMethod& m = module_.method(method_name);
    MethodLock lock(m.state().mu);
    check(bundle_->load_inputs(*m.state().method, index));
    m.execute_locked();
    py::list outputs = m.get_outputs_locked(true);
    if (auto s = bundle_->verify_outputs(*m.state().method, index, rtol, atol); !s)
      throw std::runtime_error(cat("Result verification failed with status ", static_cast<int>(s.error().code), ": ",
                                   s.error().what));
    return outputs;
  }
  const std::shared_ptr<const BundledProgram>& bundle() const { return bundle_; }
  PyModule& module() { return module_; }
  /// {method name: number of test cases}.
  py::dict test_case_counts() const {
    py::dict counts;
    for (const auto& suite : bundle_->suites()) counts[to_py_str(suite.method_name)] = suite.cases.size();
    return counts;
  }

 private:
  std::shared_ptr<const BundledProgram> bundle_;
  PyModule module_;
};

}  // namespace etrt::python
