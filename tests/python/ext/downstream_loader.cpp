// A downstream extension as data_loader.h describes one: it never registers PyDataLoader, it imports the module that
// does and returns loaders over its own DataSources. Its "packed" format is the file's bytes XORed with a key byte,
// standing in for a real compression or encryption layer.
#include <pybind11/pybind11.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "etrt/adapters/data_loader.h"

namespace py = pybind11;
using etrt::python::PyDataLoader;

PYBIND11_MODULE(_etrt_test_downstream_loader, m) {
  etrt::python::import_data_loader_type();

  // Unpacks at each load, in C++ (no Python object touched, so the GIL is released around the work).
  m.def("open_packed", [](const std::string& path, int key) {
    return PyDataLoader::from_function(
        etrt::cat("packed file '", path, "'"), [path, key]() -> etrt::Result<std::shared_ptr<const etrt::DataSource>> {
          py::gil_scoped_release release;
          std::ifstream f(path, std::ios::binary);
          if (!f) return etrt::fail(etrt::Error::AccessFailed, "cannot open '", path, "'");
          std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
          if (bytes.size() < 4) return etrt::fail(etrt::Error::InvalidProgram, "unpacking failed: truncated file");
          for (auto& b : bytes) b = static_cast<uint8_t>(b ^ key);
          return etrt::DataSource::copy_of(bytes);
        });
  }, py::arg("path"), py::arg("key"));

  // A loader over bytes the extension already holds (unpacked once, shared by every load).
  m.def("from_unpacked", [](py::bytes packed, int key) {
    std::string s = packed;
    for (auto& c : s) c = static_cast<char>(static_cast<uint8_t>(c) ^ key);
    auto src = etrt::DataSource::copy_of({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
    return PyDataLoader::from_source(std::move(src), "unpacked in C++");
  }, py::arg("packed"), py::arg("key"));
}
