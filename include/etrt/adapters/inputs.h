// Input adapters: every Python input kind becomes one HostInput (an InputTensor view plus what keeps it alive), or a
// scalar EValue. Detection, in this order: our own ExecuTorchResult, the buffer protocol, DLPack capsules, Python
// scalars, real torch.Tensor objects (read through data_ptr / stride / dtype / device), __dlpack__ producers.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // shape and stride lists as std::vector

#include <algorithm>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etrt/adapters/result.h"
#include "etrt/adapters/torch_types.h"
#include "etrt/core/utf8.h"
#include "etrt/method/method.h"

namespace etrt::python {

namespace py = pybind11;

/// Raised for a bad input; the message names the method and input index.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Releases a consumed DLPack tensor when the input no longer needs it.
struct DLPackHolder {
  DLManagedTensor* legacy = nullptr;
  dl::ManagedVersioned* versioned = nullptr;
  ~DLPackHolder() {
    if (legacy && legacy->deleter) legacy->deleter(legacy);
    if (versioned && versioned->deleter) versioned->deleter(versioned);
  }
};

/// Releases a held buffer view (PyBuffer_Release) with the input.
struct BufferRelease {
  void operator()(Py_buffer* b) const {
    if (b->obj) PyBuffer_Release(b);
    delete b;
  }
};

/// One converted input. Its shape lives inline (Dims), so converting an input allocates nothing for it; tensor()
/// views it, so take the view after the HostInput has reached its final place.
struct HostInput {
  bool is_tensor = false;
  EValue scalar;
  const void* data = nullptr;
  ScalarType dtype = ScalarType::Float;
  Dims sizes;
  Dims strides_elems;
  Device device{};
  bool writable = false;
  py::object keepalive;                               // the Python object whose memory the tensor views
  std::shared_ptr<DLPackHolder> dlpack;               // a consumed capsule
  std::unique_ptr<Py_buffer, BufferRelease> buffer;   // a held buffer view
  const char* kind = "";                              // "buffer", "torch", "DLPack", "result" (for messages)

  InputTensor tensor() const { return InputTensor{data, dtype, sizes, strides_elems, device, writable}; }
};

class InputConverter {
 public:
  InputConverter(std::string method, const MethodMeta& meta) : method_(std::move(method)), meta_(meta) {}
  /// A converter outside a method call: messages start with `context` alone, and no layout is expected.
  static InputConverter standalone(std::string context) {
    static const MethodMeta kNoMeta{};
    InputConverter c(std::string(), kNoMeta);
    c.context_ = std::move(context);
    return c;
  }

  HostInput convert(py::handle obj, size_t index) const {
    const ValueInfo* expected = index < meta_.inputs.size() ? &meta_.inputs[index] : nullptr;
    HostInput in;
    if (is_result(obj)) {
      const auto& r = obj.cast<const ExecuTorchResult&>();
      set_view(in, r.data(), r.dtype(), r.sizes(), r.strides_elems(), r.device(), !r.read_only(), "result", index);
      in.keepalive = py::reinterpret_borrow<py::object>(obj);
      return in;
    }
    // Cheap type checks first; attribute probes (which raise AttributeError internally) last.
    PyObject* o = obj.ptr();
    if (PyObject_CheckBuffer(o)) return from_buffer(obj, index, expected);  // NumPy, array, ctypes, bytes
    if (PyCapsule_CheckExact(o)) return from_capsule(obj, index);
    if (o == Py_None) return scalar(EValue());
    if (PyBool_Check(o)) return scalar(EValue(o == Py_True));
    if (PyLong_Check(o)) {
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow) throw error(index, "int does not fit in 64 bits");
      return scalar(EValue(static_cast<int64_t>(v)));
    }
    if (PyFloat_Check(o)) return scalar(EValue(PyFloat_AS_DOUBLE(o)));
    if (PyUnicode_Check(obj.ptr())) {
      strings_.push_back(obj.cast<std::string>());
      return scalar(EValue(std::string_view(strings_.back())));
    }
    if (is_torch_tensor(obj)) return from_torch(obj, index, expected);
    if (py::hasattr(obj, "__dlpack__")) return from_dlpack_producer(obj, index);
    throw error(index, cat("unsupported Python type ", std::string(py::str(py::type::handle_of(obj))),
                           "; pass tensors, buffers, DLPack producers or scalars as a flat sequence"));
  }

  InputError error(size_t index, const std::string& what) const {
    if (!context_.empty()) return InputError(sanitize_utf8(cat(context_, ": ", what)));
    return InputError(sanitize_utf8(cat("method '", method_, "': input ", index, ": ", what)));
  }

  /// Only a real torch.Tensor (torch already imported) takes the torch path, whose data_ptr() is trusted as torch's
  /// own; any other object with look-alike attributes goes through DLPack or the buffer protocol.
  static bool is_torch_tensor(py::handle obj) {
    const TorchTypes* torch = torch_types();
    return torch && PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(torch->tensor_type));
  }

 private:
  static HostInput scalar(EValue v) {
    HostInput in;
    in.scalar = std::move(v);
    return in;
  }

  void set_view(HostInput& in, const void* data, ScalarType dtype, std::span<const int64_t> sizes,
                std::span<const int64_t> strides, Device device, bool writable, const char* kind, size_t index) const {
    if (sizes.size() > static_cast<size_t>(kMaxDims)) throw error(index, cat("rank ", sizes.size(), " is too large"));
    for (int64_t s : sizes)
      if (s < 0) throw error(index, "negative size");
    if (!is_dense(sizes, strides))
      throw error(index, cat("the ", kind, " input ", numpy_name(dtype), shape_str(sizes), " with strides ",
                             shape_str(strides), " is not dense; pass a contiguous copy (e.g. numpy.ascontiguousarray)"));
    in.is_tensor = true;
    in.data = data;
    in.dtype = dtype;
    in.sizes.assign(sizes);
    in.strides_elems.assign(strides);
    in.device = device;
    in.writable = writable;
    in.kind = kind;
  }

  /// A dense CPU tensor of a known dtype, read with attribute lookups and pointer compares only; anything else
  /// (another device, a layout the method does not take, an unknown dtype) takes the general path below.
  std::optional<HostInput> from_torch_fast(py::handle t, size_t index, const ValueInfo* expected) const {
    const TorchTypes& torch = *torch_types();
    PyObject* o = t.ptr();
    auto attr = [&](PyObject* name) { return py::reinterpret_steal<py::object>(PyObject_GetAttr(o, name)); };
    py::object is_cpu = attr(torch.is_cpu);
    if (is_cpu.ptr() != Py_True) {
      PyErr_Clear();
      return std::nullopt;
    }
    py::object dtype_obj = attr(torch.dtype);
    const auto dtype = dtype_obj ? torch.scalar_type(dtype_obj.ptr()) : std::nullopt;
    py::object shape = attr(torch.shape);
    if (!dtype || !shape || !PyTuple_Check(shape.ptr()) || PyTuple_GET_SIZE(shape.ptr()) > kMaxDims) {
      PyErr_Clear();
      return std::nullopt;
    }
    const Py_ssize_t rank = PyTuple_GET_SIZE(shape.ptr());
    std::array<int64_t, kMaxDims> sizes{}, strides{};
    for (Py_ssize_t d = 0; d < rank; ++d) sizes[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), d));
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return std::nullopt;
    }
    // A contiguous tensor (what users almost always pass) has the row-major strides of its sizes: is_contiguous()
    // is cheaper than stride(), which builds a tuple. Any other tensor reports its strides.
    auto contiguous = py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(o, torch.is_contiguous));
    if (contiguous.ptr() == Py_True) {
      for (int64_t d = rank, step = 1; d-- > 0;) {
        strides[d] = step;
        if (__builtin_mul_overflow(step, std::max<int64_t>(sizes[d], 1), &step)) return std::nullopt;
      }
    } else {
      auto stride = py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(o, torch.stride));
      if (!stride || !PyTuple_Check(stride.ptr()) || PyTuple_GET_SIZE(stride.ptr()) != rank) {
        PyErr_Clear();
        return std::nullopt;
      }
      for (Py_ssize_t d = 0; d < rank; ++d) strides[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(stride.ptr(), d));
    }
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return std::nullopt;
    }
    const std::span<const int64_t> sz(sizes.data(), rank), st(strides.data(), rank);
    if (expected && expected->tensor && expected->tensor->dim_order.size() == static_cast<size_t>(rank) &&
        (!is_dense(sz, st) || !strides_match_dim_order(sz, st, expected->tensor->dim_order)))
      return std::nullopt;  // torch makes the exported layout first (general path)
    auto ptr = py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(o, torch.data_ptr));
    if (!ptr) {
      PyErr_Clear();
      return std::nullopt;
    }
    const auto address = static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(ptr.ptr()));
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return std::nullopt;
    }
    HostInput in;
    set_view(in, reinterpret_cast<const void*>(address), *dtype, sz, st, Device{}, true, "torch", index);
    in.keepalive = py::reinterpret_borrow<py::object>(t);
    return in;
  }

  HostInput from_torch(py::handle t, size_t index, const ValueInfo* expected) const {
    if (auto fast = from_torch_fast(t, index, expected)) return std::move(*fast);
    py::object dev = t.attr("device");
    const std::string dev_type = py::str(dev.attr("type"));
    Device device{};
    if (dev_type == "cuda") {
      py::object idx = dev.attr("index");
      device = Device{DeviceType::CUDA, static_cast<int8_t>(idx.is_none() ? 0 : idx.cast<int>())};
    } else if (dev_type != "cpu") {
      throw error(index, cat("tensor is on device ", std::string(py::str(dev)),
                             "; only CPU and CUDA tensors can be passed to a method"));
    }
    const std::string dtype_name = py::str(t.attr("dtype"));
    const auto dtype = from_torch_dtype_name(dtype_name);
    if (!dtype) throw error(index, cat("unsupported torch dtype ", dtype_name));
    py::object obj = py::reinterpret_borrow<py::object>(t);
    auto read = [&](const py::object& o, std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
      sizes = py::cast<std::vector<int64_t>>(py::tuple(o.attr("shape")));
      strides = py::cast<std::vector<int64_t>>(o.attr("stride")());
      if (sizes.size() != strides.size())
        throw error(index, cat("torch tensor reports ", sizes.size(), " sizes and ", strides.size(), " strides"));
    };
    std::vector<int64_t> sizes, strides;
    read(obj, sizes, strides);
    // torch converts a tensor in another layout into the exported one, on the tensor's own device.
    if (expected && expected->tensor && expected->tensor->dim_order.size() == sizes.size() &&
        (!is_dense(sizes, strides) || !strides_match_dim_order(sizes, strides, expected->tensor->dim_order))) {
      const auto& order = expected->tensor->dim_order;
      // torch copies on its own stream; wait first for whoever may still be writing the tensor
      // (Note [device waits]).
      if (!device.is_cpu()) device_runtime().wait(device.index);
      py::list perm, inv(order.size());
      for (size_t k = 0; k < order.size(); ++k) {
        perm.append(static_cast<int>(order[k]));
        inv[order[k]] = py::int_(k);
      }
      obj = obj.attr("permute")(*perm).attr("contiguous")().attr("permute")(*inv);
      read(obj, sizes, strides);
    }
    const auto ptr = obj.attr("data_ptr")().cast<uintptr_t>();
    HostInput in;
    set_view(in, reinterpret_cast<const void*>(ptr), *dtype, sizes, strides, device, true, "torch", index);
    in.keepalive = obj;
    return in;
  }

  HostInput from_capsule(py::handle cap, size_t index) const {
    const char* name = PyCapsule_GetName(cap.ptr());
    const std::string n = name ? name : "";
    if (n == "used_dltensor" || n == "used_dltensor_versioned")
      throw error(index, "this DLPack capsule was already consumed; a capsule can be passed only once");
    HostInput in;
    auto holder = std::make_shared<DLPackHolder>();
    const DLTensor* t = nullptr;
    bool writable = true;
    if (n == "dltensor") {
      holder->legacy = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
      if (!holder->legacy) throw py::error_already_set();
      t = &holder->legacy->dl_tensor;
      PyCapsule_SetName(cap.ptr(), "used_dltensor");
    } else if (n == "dltensor_versioned") {
      holder->versioned = static_cast<dl::ManagedVersioned*>(PyCapsule_GetPointer(cap.ptr(), "dltensor_versioned"));
      if (!holder->versioned) throw py::error_already_set();
      if (holder->versioned->version.major > dl::kMajor) {
        auto* v = holder->versioned;
        holder->versioned = nullptr;  // a newer ABI: do not touch the rest of the struct; leave it to its owner
        (void)v;
        throw error(index, "DLPack capsule has an unsupported major version");
      }
      t = &holder->versioned->dl_tensor;
      writable = (holder->versioned->flags & dl::kFlagReadOnly) == 0;
      PyCapsule_SetName(cap.ptr(), "used_dltensor_versioned");
    } else {
      throw error(index, cat("unsupported capsule '", n, "'; expected a DLPack capsule"));
    }
    const auto dtype = from_dlpack_dtype(t->dtype);
    if (!dtype)
      throw error(index, cat("unsupported DLPack dtype (code ", static_cast<int>(t->dtype.code), ", bits ",
                             static_cast<int>(t->dtype.bits), ", lanes ", t->dtype.lanes, ")"));
    Device device{};
    const int dt = static_cast<int>(t->device.device_type);
    if (dt == dl::kCUDA || dt == dl::kCUDAManaged) {
      device = Device{DeviceType::CUDA, static_cast<int8_t>(t->device.device_id)};
    } else if (dt != dl::kCPU && dt != dl::kCUDAHost) {
      throw error(index, cat("DLPack tensor is on device type ", dt, "; only CPU and CUDA are supported"));
    }
    if (t->ndim < 0 || t->ndim > kMaxDims) throw error(index, cat("DLPack tensor rank ", t->ndim, " is invalid"));
    Dims sizes(std::span<const int64_t>(t->shape, static_cast<size_t>(t->ndim))), strides;
    strides.resize(static_cast<size_t>(t->ndim));
    if (t->strides) {
      std::copy(t->strides, t->strides + t->ndim, strides.begin());
    } else {
      int64_t s = 1;
      for (int d = t->ndim; d-- > 0;) {
        strides[d] = s;
        s *= sizes[d];
      }
    }
    set_view(in, static_cast<const uint8_t*>(t->data) + t->byte_offset, *dtype, sizes, strides, device, writable,
             "DLPack", index);
    in.dlpack = std::move(holder);
    return in;
  }

  /// An object whose buffer cannot be used (a bfloat16 array of ml_dtypes or JAX, say) may still export DLPack:
  /// that is tried next, and when it fails too the error names both reasons.
  HostInput from_dlpack_instead(py::handle obj, size_t index, const std::string& buffer_problem) const {
    if (!py::hasattr(obj, "__dlpack__")) throw error(index, buffer_problem);
    std::string dlpack_problem;
    try {
      return from_dlpack_producer(obj, index);
    } catch (InputError& e) {
      dlpack_problem = e.what();
      if (const std::string prefix = error(index, "").what(); dlpack_problem.starts_with(prefix))
        dlpack_problem.erase(0, prefix.size());
    } catch (py::error_already_set& e) {
      dlpack_problem = cat(std::string(py::str(e.type().attr("__name__"))), ": ", std::string(py::str(e.value())));
    }
    throw error(index, cat(buffer_problem, "; and its __dlpack__ failed too: ", dlpack_problem));
  }

  HostInput from_dlpack_producer(py::handle obj, size_t index) const {
    py::object cap;
    try {
      cap = obj.attr("__dlpack__")(py::arg("max_version") = py::make_tuple(dl::kMajor, dl::kMinor));
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_TypeError)) throw;
      cap = obj.attr("__dlpack__")();
    }
    HostInput in = from_capsule(cap, index);
    in.keepalive = py::reinterpret_borrow<py::object>(obj);
    return in;
  }

  HostInput from_buffer(py::handle obj, size_t index, const ValueInfo* expected) const {
    std::unique_ptr<Py_buffer, BufferRelease> view(new Py_buffer{});
    if (PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_RECORDS_RO) != 0) {
      view->obj = nullptr;
      py::error_already_set why;  // takes (and clears) the exporter's reason
      return from_dlpack_instead(obj, index, cat("cannot read the buffer of ", std::string(py::str(py::type::handle_of(obj))),
                                                 " (", std::string(py::str(why.type().attr("__name__"))), ": ",
                                                 std::string(py::str(why.value())), ")"));
    }
    const std::string_view fmt = view->format ? view->format : "B";
    auto dtype = parse_buffer_format(fmt, static_cast<size_t>(view->itemsize));
    if (!dtype)
      return from_dlpack_instead(obj, index, cat("unsupported buffer format '", fmt, "' (itemsize ", view->itemsize, ")"));
    if (view->ndim < 0 || view->ndim > kMaxDims || view->itemsize <= 0)
      throw error(index, cat("buffer of rank ", view->ndim, " is not supported"));
    // Some exporters (ctypes) leave shape or strides null: null shape = one dimension of len / itemsize,
    // null strides = C-contiguous.
    Dims sizes, strides;
    sizes.resize(static_cast<size_t>(view->ndim));
    strides.resize(static_cast<size_t>(view->ndim));
    for (int d = 0; d < view->ndim; ++d)
      sizes[d] = view->shape ? view->shape[d] : static_cast<int64_t>(view->len / view->itemsize);
    int64_t contiguous_stride = 1;
    for (int d = view->ndim; d-- > 0;) {
      if (view->strides) {
        if (view->strides[d] % view->itemsize != 0)
          throw error(index, "buffer strides are not a multiple of the item size");
        strides[d] = view->strides[d] / view->itemsize;
      } else {
        strides[d] = contiguous_stride;
        contiguous_stride *= sizes[d];
      }
    }
    // Raw bytes for a bfloat16 input take the exported shape (NumPy has no bfloat16).
    if (expected && expected->tensor && expected->tensor->dtype == ScalarType::BFloat16 &&
        (*dtype == ScalarType::Byte || *dtype == ScalarType::UInt16) && PyBuffer_IsContiguous(view.get(), 'C') &&
        static_cast<size_t>(view->len) == expected->tensor->nbytes()) {
      dtype = ScalarType::BFloat16;
      sizes.assign(expected->tensor->sizes);
      strides.resize(sizes.size());
      strides_from_dim_order(sizes, expected->tensor->dim_order, strides.span());
    }
    HostInput in;
    set_view(in, view->buf, *dtype, sizes, strides, Device{}, !view->readonly, "buffer", index);
    in.buffer = std::move(view);
    in.keepalive = py::reinterpret_borrow<py::object>(obj);
    return in;
  }

  std::string method_;
  std::string context_;  // replaces "method 'm': input i" in messages when set
  const MethodMeta& meta_;
  mutable std::list<std::string> strings_;  // storage for String inputs during the call (stable, empty = no allocation)
};

/// The strides (in elements) that make a dense tensor contiguous in its own dim order: dims sorted by decreasing
/// stride (size-1 dims stay where they are), so size-1 dims get canonical strides too.
inline std::vector<int64_t> canonical_strides(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  std::vector<uint8_t> order(sizes.size()), moving;  // size-1 dims keep their positions; the others sort
  for (size_t d = 0; d < order.size(); ++d) {
    order[d] = static_cast<uint8_t>(d);
    if (sizes[d] != 1) moving.push_back(static_cast<uint8_t>(d));
  }
  std::stable_sort(moving.begin(), moving.end(), [&](uint8_t a, uint8_t b) { return strides[a] > strides[b]; });
  for (size_t d = 0, k = 0; d < order.size(); ++d)
    if (sizes[d] != 1) order[d] = moving[k++];
  std::vector<int64_t> out(sizes.size());
  strides_from_dim_order(sizes, order, out);
  return out;
}

/// ExecuTorchResult.from_host: a host tensor (buffer, CPU DLPack, CPU torch tensor or CPU result) copied to CUDA
/// device `device_index`, laid out contiguously in its own dim order.
inline ExecuTorchResult result_from_host(py::handle obj, int device_index) {
  constexpr std::string_view kWhere = "ExecuTorchResult.from_host";
  DeviceRuntime& rt = device_runtime();
  if (const std::string problem = rt.device_problem(device_index); !problem.empty())
    throw std::runtime_error(cat(kWhere, ": ", problem));
  InputConverter conv = InputConverter::standalone(std::string(kWhere));
  HostInput in = conv.convert(obj, 0);
  if (!in.is_tensor)
    throw py::type_error(cat(kWhere, " takes a CPU tensor (a buffer such as a NumPy array, a DLPack tensor or a torch "
                                     "tensor), got ", std::string(py::str(py::type::handle_of(obj)))));
  if (!in.device.is_cpu())
    throw std::runtime_error(cat(kWhere, " copies host memory, but this ", in.kind, " input is on ",
                                 in.device.str(), "; pass it to the method directly"));
  const Device device{DeviceType::CUDA, static_cast<int8_t>(device_index)};
  rt.lock();
  auto strides = canonical_strides(in.sizes, in.strides_elems);
  ExecuTorchResult like = ExecuTorchResult::view(const_cast<void*>(in.data), in.dtype, in.sizes,
                                                 strides, Device{}, nullptr);
  const size_t n = like.nbytes();
  auto storage = Storage::allocate(n, device);
  // Dense with non-negative strides (checked by the converter): the bytes are one block starting at data.
  if (n)
    if (auto s = rt.cuda()->copy(storage->data(), in.data, n, CopyKind::HostToDevice, device_index); !s)
      throw std::runtime_error(sanitize_utf8(cat(kWhere, ": ", s.error().describe())));
  return ExecuTorchResult::owning(like, std::move(storage));
}

}  // namespace etrt::python
