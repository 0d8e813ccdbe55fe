// ExecuTorchResult: an output tensor handed to Python. It keeps its storage's owner alive (a clone it owns, or
// the Method whose memory it borrows), exposes the buffer protocol on CPU and DLPack everywhere.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "etrt/adapters/device_runtime.h"
#include "etrt/adapters/dtype_codes.h"
#include "etrt/core/dims.h"
#include "etrt/core/tensor.h"
#include "etrt/core/tensor_copy.h"
#include "etrt/core/utf8.h"
#include "etrt/method/memory_plan.h"

namespace etrt::python {

namespace py = pybind11;

/// Memory a result or an unplanned output owns: host memory, or an allocation on a CUDA device (made through the
/// device layer, which lives for the whole process, so the last owner may release it from any thread).
struct Storage {
  Device device{};
  size_t size = 0;       // usable bytes
  ArenaPtr host;         // device.is_cpu()
  DeviceBuffer on_device;  // otherwise

  void* data() const { return device.is_cpu() ? static_cast<void*>(host.get()) : on_device.data(); }

  /// New zeroed host storage, or null when `n` bytes cannot be allocated.
  static std::shared_ptr<Storage> try_allocate(size_t n) {
    auto s = std::make_shared<Storage>();
    s->host = allocate_aligned(n);
    if (!s->host) return nullptr;
    s->size = n;
    return s;
  }
  /// New zeroed storage on `device` (through `api` for a device). Device memory is never null, even for 0 bytes,
  /// so a result's data pointer identifies its storage.
  static Result<std::shared_ptr<Storage>> try_allocate_on(Device device, size_t n, const DeviceInterface* api) {
    if (device.is_cpu()) {
      auto s = try_allocate(n);
      if (!s) return fail(Error::MemoryAllocationFailed, "cannot allocate ", n, " bytes");
      return s;
    }
    if (!api || api->type() != device.type)
      return fail(Error::NotSupported, "allocating memory on ", device.str(), " needs CUDA-enabled bindings");
    if (n > kMaxAllocationBytes) return fail(Error::MemoryAllocationFailed, n, " bytes is too large");
    auto s = std::make_shared<Storage>();
    s->device = device;
    ETRT_TRY(s->on_device, DeviceBuffer::allocate(*api, n ? n : 1, device.index));
    s->size = n;
    return s;
  }
  /// The same, raising a RuntimeError that names the size and device when it fails.
  static std::shared_ptr<Storage> allocate(size_t n, Device device = {}) {
    auto s = try_allocate_on(device, n, device_runtime().cuda());
    if (!s) throw std::runtime_error(cat("cannot allocate ", n, " bytes on ", device.str(), " for a result: ",
                                         s.error().what));
    return std::move(*s);
  }
};

/// The device layer for copying `d`'s memory, raising (with `what` as context) when this build has none.
inline const DeviceInterface& copy_api(Device d, std::string_view what) {
  const DeviceInterface* api = device_runtime().cuda();
  if (!api || api->type() != d.type)
    throw std::runtime_error(cat(what, ": copying CUDA memory (", d.str(), ") needs CUDA-enabled bindings"));
  return *api;
}

class ExecuTorchResult {
 public:
  ExecuTorchResult() = default;
  /// A view of `t`'s memory, kept valid by `owner`.
  ExecuTorchResult(const Tensor& t, std::shared_ptr<const void> owner, bool read_only)
      : data_(t.data()),
        dtype_(t.dtype()),
        device_(t.device()),
        sizes_(t.sizes()),
        strides_(t.strides()),
        owner_(std::move(owner)),
        read_only_(read_only) {}

  /// A copy of `t` on its own device into new storage, same shape, strides and dim order. A CUDA copy costs an
  /// allocation, a device-to-device copy and one wait (Note [device waits]).
  static ExecuTorchResult clone_of(const Tensor& t) {
    if (!t.data() && t.nbytes() > 0) throw std::runtime_error("cannot read an output tensor without storage");
    return ExecuTorchResult(t, nullptr, false).copy();
  }

  void* data() const { return data_; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool read_only() const { return read_only_; }
  std::span<const int64_t> sizes() const { return sizes_; }
  std::span<const int64_t> strides_elems() const { return strides_; }
  int64_t numel() const { return checked_numel(sizes_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype_); }
  const std::shared_ptr<const void>& owner() const { return owner_; }

  /// A fresh, writable, owning copy on the same device (DLPack copies, clones, read-only results in torch mode).
  /// The result is dense in its own dim order, so its bytes are one block starting at data(). A CUDA copy is
  /// queued on the device; `wait` waits for it (the caller may wait itself instead).
  ExecuTorchResult copy(bool wait = true) const {
    if (device_.is_cpu()) return copy_to(Device{}, CopyKind::DeviceToDevice);
    const DeviceInterface& api = copy_api(device_, "copying a CUDA result");
    ExecuTorchResult r = copy_to(device_, CopyKind::DeviceToDevice, &api);
    if (wait) device_runtime().wait(device_.index);
    return r;
  }

  /// This result in host memory: itself when it is on the CPU, else a device-to-host copy after one wait.
  ExecuTorchResult to_host(bool wait = true) const {
    if (device_.is_cpu()) return *this;
    const DeviceInterface& api = copy_api(device_, "to_host()");
    if (wait) device_runtime().wait(device_.index);
    return copy_to(Device{}, CopyKind::DeviceToHost, &api);
  }

  /// A result that owns `storage` and views it with `like`'s shape, strides and dtype.
  static ExecuTorchResult owning(const ExecuTorchResult& like, std::shared_ptr<Storage> storage) {
    ExecuTorchResult r = like;
    r.data_ = storage->data();
    r.device_ = storage->device;
    r.owner_ = std::move(storage);
    r.read_only_ = false;
    return r;
  }
  /// A CPU or CUDA view of `data` with the given layout (ExecuTorchResult.from_host).
  /// The caller checked the rank (at most kMaxDims).
  static ExecuTorchResult view(void* data, ScalarType dtype, std::span<const int64_t> sizes,
                               std::span<const int64_t> strides_elems, Device device, std::shared_ptr<const void> owner) {
    ExecuTorchResult r;
    r.data_ = data;
    r.dtype_ = dtype;
    r.device_ = device;
    r.sizes_.assign(sizes);
    r.strides_.assign(strides_elems);
    r.owner_ = std::move(owner);
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

  bool is_dense() const { return ::etrt::is_dense(sizes_, strides_); }

 private:
  /// A copy into new storage on `to`: memcpy on the host, else through the device layer.
  ExecuTorchResult copy_to(Device to, CopyKind kind, const DeviceInterface* api = nullptr) const {
    if (!is_dense()) throw std::runtime_error("cannot copy a result that is not dense");
    auto storage = Storage::allocate(nbytes(), to);
    const size_t n = nbytes();
    if (n && device_.is_cpu() && to.is_cpu()) {
      std::memcpy(storage->data(), data_, n);
    } else if (n) {
      const int index = device_.is_cpu() ? to.index : device_.index;
      if (auto s = api->copy(storage->data(), data_, n, kind, index); !s)
        throw std::runtime_error(sanitize_utf8(s.error().describe()));
    }
    return owning(*this, std::move(storage));
  }

  void* data_ = nullptr;
  ScalarType dtype_ = ScalarType::Float;
  Device device_{};
  Dims sizes_;
  Dims strides_;
  std::shared_ptr<const void> owner_;
  bool read_only_ = false;
};

// ---- DLPack export ----------------------------------------------------------------------------------------------

namespace detail {
/// One exported tensor: the DLPack struct and what it points to, in one allocation (manager_ctx points here).
template <class Managed>
struct DLExport {
  Managed managed{};
  std::shared_ptr<const void> owner;
  Dims shape;
  Dims strides;
};

template <class Managed>
inline void fill_dl(DLExport<Managed>* e, const ExecuTorchResult& r) {
  e->owner = r.owner();
  e->shape.assign(r.sizes());
  e->strides.assign(r.strides_elems());
  Managed* m = &e->managed;
  m->manager_ctx = e;
  DLTensor& t = m->dl_tensor;
  t.data = r.data();
  t.device = DLDevice{r.device().is_cpu() ? static_cast<DLDeviceType>(dl::kCPU) : static_cast<DLDeviceType>(dl::kCUDA),
                      r.device().is_cpu() ? 0 : r.device().index};
  t.ndim = static_cast<int32_t>(e->shape.size());
  t.dtype = *to_dlpack_dtype(r.dtype());
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;
}

inline void delete_legacy(DLManagedTensor* m) { delete static_cast<DLExport<DLManagedTensor>*>(m->manager_ctx); }
inline void delete_versioned(dl::ManagedVersioned* m) {
  delete static_cast<DLExport<dl::ManagedVersioned>*>(m->manager_ctx);
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
  if (versioned) {
    auto* e = new detail::DLExport<dl::ManagedVersioned>();
    dl::ManagedVersioned* m = &e->managed;
    m->version = {dl::kMajor, dl::kMinor};
    m->deleter = &detail::delete_versioned;
    m->flags = flags;
    detail::fill_dl(e, r);
    PyObject* cap = PyCapsule_New(m, "dltensor_versioned", &detail::versioned_capsule_destructor);
    if (!cap) {
      detail::delete_versioned(m);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::capsule>(cap);
  }
  auto* e = new detail::DLExport<DLManagedTensor>();
  DLManagedTensor* m = &e->managed;
  m->deleter = &detail::delete_legacy;
  detail::fill_dl(e, r);
  PyObject* cap = PyCapsule_New(m, "dltensor", &detail::legacy_capsule_destructor);
  if (!cap) {
    detail::delete_legacy(m);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

}  // namespace etrt::python
