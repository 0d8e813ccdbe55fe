// ExecuTorchResult: an output tensor handed to Python. It keeps its storage's owner alive (a clone it owns, or
// the Method whose memory it borrows), exposes the buffer protocol on CPU and DLPack everywhere.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "etrt/adapters/dtype_codes.h"
#include "etrt/core/tensor.h"
#include "etrt/core/tensor_copy.h"
#include "etrt/method/memory_plan.h"

namespace etrt::python {

namespace py = pybind11;

/// Owned storage for a cloned output.
struct HostStorage {
  ArenaPtr bytes;
  size_t size = 0;
  /// New zeroed storage, or null when `n` bytes cannot be allocated.
  static std::shared_ptr<HostStorage> try_allocate(size_t n) {
    auto s = std::make_shared<HostStorage>();
    s->bytes = allocate_aligned(n);
    if (!s->bytes) return nullptr;
    s->size = n;
    return s;
  }
  /// The same, raising a RuntimeError that names the size when it fails.
  static std::shared_ptr<HostStorage> allocate(size_t n) {
    auto s = try_allocate(n);
    if (!s) throw std::runtime_error(cat("cannot allocate ", n, " bytes for a result"));
    return s;
  }
};

class ExecuTorchResult {
 public:
  ExecuTorchResult() = default;
  /// A view of `t`'s memory, kept valid by `owner`.
  ExecuTorchResult(const Tensor& t, std::shared_ptr<const void> owner, bool read_only)
      : data_(t.data()), dtype_(t.dtype()), device_(t.device()), owner_(std::move(owner)), read_only_(read_only) {
    sizes_.assign(t.sizes().begin(), t.sizes().end());
    strides_.assign(t.strides().begin(), t.strides().end());
  }

  /// A copy of `t` into new host storage, same shape, strides and dim order.
  static ExecuTorchResult clone_of(const Tensor& t) {
    if (!t.data() && t.nbytes() > 0) throw std::runtime_error("cannot read an output tensor without storage");
    auto storage = HostStorage::allocate(t.nbytes());
    if (t.nbytes()) std::memcpy(storage->bytes.get(), t.data(), t.nbytes());  // dense in its own dim order
    ExecuTorchResult r(t, storage, false);
    r.data_ = storage->bytes.get();
    return r;
  }

  void* data() const { return data_; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool read_only() const { return read_only_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& strides_elems() const { return strides_; }
  int64_t numel() const { return checked_numel(sizes_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype_); }
  const std::shared_ptr<const void>& owner() const { return owner_; }

  /// A fresh owning copy (used for DLPack copies and to_host).
  ExecuTorchResult copy() const {
    auto storage = HostStorage::allocate(nbytes());
    if (nbytes()) std::memcpy(storage->bytes.get(), data_, nbytes());
    ExecuTorchResult r = *this;
    r.data_ = storage->bytes.get();
    r.owner_ = storage;
    r.read_only_ = false;
    return r;
  }

  py::buffer_info buffer(bool writable_request) const {
    const std::string_view fmt = buffer_format(dtype_);
    const auto esize = static_cast<py::ssize_t>(element_size(dtype_));
    if (writable_request && read_only_)
      throw py::buffer_error("this ExecuTorchResult is read-only (a program constant)");
    if (fmt.empty()) {  // bfloat16 and other dtypes without a PEP 3118 code: flat bytes
      if (!is_dense())
        throw py::buffer_error("a non-dense " + std::string(numpy_name(dtype_)) + " result cannot be exported as bytes");
      return py::buffer_info(data_, 1, "B", 1, {static_cast<py::ssize_t>(nbytes())}, {1}, read_only_);
    }
    std::vector<py::ssize_t> shape(sizes_.begin(), sizes_.end()), strides;
    for (int64_t s : strides_) strides.push_back(s * esize);
    return py::buffer_info(data_, esize, std::string(fmt), static_cast<py::ssize_t>(shape.size()), shape, strides,
                           read_only_);
  }

  bool is_dense() const {
    std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
    for (size_t i = 0; i < sizes_.size(); ++i)
      if (sizes_[i] != 1) dims.emplace_back(strides_[i], sizes_[i]);
    std::sort(dims.begin(), dims.end(), [](auto a, auto b) { return a.first > b.first; });
    int64_t expect = 1;
    for (size_t k = dims.size(); k-- > 0;) {
      if (dims[k].first != expect) return false;
      expect *= dims[k].second;
    }
    return true;
  }

 private:
  void* data_ = nullptr;
  ScalarType dtype_ = ScalarType::Float;
  Device device_{};
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  std::shared_ptr<const void> owner_;
  bool read_only_ = false;
};

// ---- DLPack export ----------------------------------------------------------------------------------------------

namespace detail {
struct DLContext {
  std::shared_ptr<const void> owner;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

template <class Managed>
inline void fill_dl(Managed* m, DLContext* ctx, const ExecuTorchResult& r) {
  ctx->owner = r.owner();
  ctx->shape = r.sizes();
  ctx->strides = r.strides_elems();
  m->manager_ctx = ctx;
  DLTensor& t = m->dl_tensor;
  t.data = r.data();
  t.device = DLDevice{r.device().is_cpu() ? static_cast<DLDeviceType>(dl::kCPU) : static_cast<DLDeviceType>(dl::kCUDA),
                      r.device().is_cpu() ? 0 : r.device().index};
  t.ndim = static_cast<int32_t>(ctx->shape.size());
  t.dtype = *to_dlpack_dtype(r.dtype());
  t.shape = ctx->shape.data();
  t.strides = ctx->strides.data();
  t.byte_offset = 0;
}

inline void delete_legacy(DLManagedTensor* m) {
  delete static_cast<DLContext*>(m->manager_ctx);
  delete m;
}
inline void delete_versioned(dl::ManagedVersioned* m) {
  delete static_cast<DLContext*>(m->manager_ctx);
  delete m;
}
// A capsule not consumed by anyone still owns its tensor; a consumer renames it to "used_*".
inline void legacy_capsule_destructor(PyObject* cap) {
  if (PyCapsule_IsValid(cap, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  }
}
inline void versioned_capsule_destructor(PyObject* cap) {
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    auto* m = static_cast<dl::ManagedVersioned*>(PyCapsule_GetPointer(cap, "dltensor_versioned"));
    if (m && m->deleter) m->deleter(m);
  }
}
}  // namespace detail

/// The capsule for `__dlpack__`; `versioned` selects DLPack 1.0 (then `flags` carries READ_ONLY / IS_COPIED).
inline py::capsule to_dlpack_capsule(const ExecuTorchResult& r, bool versioned, uint64_t flags) {
  if (!to_dlpack_dtype(r.dtype()))
    throw std::runtime_error("dtype " + std::string(numpy_name(r.dtype())) + " has no DLPack code");
  auto* ctx = new detail::DLContext();
  if (versioned) {
    auto* m = new dl::ManagedVersioned{};
    m->version = {dl::kMajor, dl::kMinor};
    m->deleter = &detail::delete_versioned;
    m->flags = flags;
    detail::fill_dl(m, ctx, r);
    PyObject* cap = PyCapsule_New(m, "dltensor_versioned", &detail::versioned_capsule_destructor);
    if (!cap) {
      detail::delete_versioned(m);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::capsule>(cap);
  }
  auto* m = new DLManagedTensor{};
  m->deleter = &detail::delete_legacy;
  detail::fill_dl(m, ctx, r);
  PyObject* cap = PyCapsule_New(m, "dltensor", &detail::legacy_capsule_destructor);
  if (!cap) {
    detail::delete_legacy(m);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

}  // namespace etrt::python
