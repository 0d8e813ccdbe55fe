// Binding a caller's inputs and output storage to a loaded Method: copied into planned memory or aliased, on the
// host or a device, with every dtype, shape and device checked first.
#pragma once

#include "etrt/method/method.h"

namespace etrt {

/// Every element of a host bool view is the byte 0 or 1 (any strides, any order).
inline bool bool_bytes_valid(const InputTensor& src) {
  const auto* base = static_cast<const uint8_t*>(src.data);
  const size_t rank = src.sizes.size();
  std::array<int64_t, kMaxDims> idx{};
  const int64_t n = checked_numel(src.sizes);
  bool row_major = true;  // the usual view: one scan of the bytes (an element at a time took 1.5 ns)
  for (int64_t d = static_cast<int64_t>(rank) - 1, step = 1; d >= 0 && row_major; --d) {
    row_major = src.sizes[static_cast<size_t>(d)] == 1 || src.strides_elems[static_cast<size_t>(d)] == step;
    step *= src.sizes[static_cast<size_t>(d)];
  }
  if (row_major) return first_non_bool_byte(base, static_cast<size_t>(n)) == static_cast<size_t>(n);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (base[off] > 1) return false;
    for (size_t d = rank; d-- > 0;) {  // odometer over the dims, last fastest
      off += src.strides_elems[d];
      if (++idx[d] < src.sizes[d]) break;
      off -= src.strides_elems[d] * src.sizes[d];
      idx[d] = 0;
    }
  }
  return true;
}

inline Result<InputBinding> Method::set_input(size_t index, const InputTensor& src) {
  if (index >= inputs_.size())
    return fail(Error::InvalidArgument, where(), ": input index ", index, " out of range (", inputs_.size(),
                " inputs)");
  EValue& v = *inputs_[index];
  if (!v.is_tensor())
    return fail(Error::InvalidArgument, where(), ": input ", index, " expected ", tag_name(v.tag()), ", got a tensor");
  // The file declares every tensor it means to be one; a value it declares otherwise (None, say) holds a tensor
  // only because a move instruction of an earlier execution put one there, and has no shape or place to check
  // against.
  const TensorMeta* declared = value_meta_[static_cast<size_t>(inputs_[index] - values_.data())];
  if (!declared)
    return fail(Error::InvalidProgram, where(), ": input ", index,
                " is not declared as a tensor by the program (it holds one only because an instruction moved it "
                "there)");
  const TensorMeta& meta = *declared;
  Tensor& t = v.tensor_unchecked();
  const auto describe = [&](ScalarType dt, std::span<const int64_t> s) { return cat(numpy_name(dt), shape_str(s)); };
  if (src.dtype != t.dtype())
    return fail(Error::InvalidArgument, where(), ": input ", index, " expected dtype ", numpy_name(t.dtype()),
                ", got ", numpy_name(src.dtype), " (expected ", describe(t.dtype(), t.max_sizes()), ", got ",
                describe(src.dtype, src.sizes), ")");
  if (src.sizes.size() != static_cast<size_t>(t.dim()))
    return fail(Error::InvalidArgument, where(), ": input ", index, " expected rank ", t.dim(), " ",
                describe(t.dtype(), t.max_sizes()), ", got rank ", src.sizes.size(), " ",
                describe(src.dtype, src.sizes));
  const Device want = t.device();
  if (src.device != want)
    return fail(Error::InvalidArgument, where(), ": input ", index, " is on ", src.device.str(),
                ", the method expects it on ", want.str(),
                want.is_cpu() ? std::string(" (copy it to the host first)")
                              : cat(" (pass a CUDA tensor or ExecuTorchResult.from_host(x, device_index=",
                                    static_cast<int>(want.index), "))"));
  if (auto s = t.resize(src.sizes); !s)
    return fail(s.error().code, where(), ": input ", index, " ", s.error().what);
  const size_t nbytes = t.nbytes();
  if (nbytes > 0 && !src.data)
    return fail(Error::InvalidArgument, where(), ": input ", index, " has no data pointer");
  const bool same_layout = strides_match_dim_order(src.sizes, src.strides_elems, t.dim_order());
  std::array<int64_t, kMaxDims> dst_strides{};
  std::copy(t.strides().begin(), t.strides().end(), dst_strides.begin());
  const auto copy_into = [&](void* dst) {
    if (nbytes == 0) return;
    if (same_layout)
      std::memcpy(dst, src.data, nbytes);
    else
      copy_strided(dst, std::span<const int64_t>(dst_strides.data(), t.dim()), src.data, src.strides_elems,
                   src.sizes, element_size(t.dtype()));
  };
  // A FreeCall of an earlier execution may have dropped a planned input's storage; its arena slot is still there.
  if (meta.has_allocation && t.data() == nullptr && nbytes > 0) {
    auto slot = memory_.address(meta.memory_id, meta.memory_offset, meta.nbytes());
    if (!slot) return fail(slot.error().code, where(), ": input ", index, ": ", slot.error().what);
    t.set_data(*slot);
  }
  if (!want.is_cpu()) return bind_device_input(index, t, meta, src, same_layout);
  // A bool byte other than 0 or 1 is not a bool: kernels reading it would be undefined behaviour.
  if (t.dtype() == ScalarType::Bool && nbytes > 0 && !bool_bytes_valid(src))
    return fail(Error::InvalidArgument, where(), ": input ", index,
                " is a bool tensor holding bytes other than 0 and 1");
  input_set_[index] = true;
  if (!same_layout && log_enabled(LogLevel::Debug))
    log(LogLevel::Debug, cat(where(), ": input ", index, " copied into the exported dim order ",
                             shape_str(std::vector<int64_t>(t.dim_order().begin(), t.dim_order().end()))));
  if (meta.has_allocation) {  // planned: the arena slot was bound at load
    copy_into(t.data());
    return InputBinding::Copied;
  }
  if (same_layout && src.writable) {
    t.set_data(const_cast<void*>(src.data));
    return InputBinding::Aliased;
  }
  const size_t cap = t.capacity_nbytes();
  if (input_staging_size_[index] < cap || !input_staging_[index]) {
    input_staging_[index] = allocate_aligned(cap);
    if (!input_staging_[index])
      return fail(Error::MemoryAllocationFailed, where(), ": cannot allocate ", cap, " bytes for input ", index);
    input_staging_size_[index] = cap;
  }
  t.set_data(input_staging_[index].get());
  copy_into(t.data());
  return InputBinding::Copied;
}

inline Result<InputBinding> Method::bind_device_input(size_t index, Tensor& t, const TensorMeta& meta,
                                                      const InputTensor& src, bool same_layout) {
  const size_t nbytes = t.nbytes();
  if (!same_layout)
    return fail(Error::InvalidArgument, where(), ": input ", index, " on ", src.device.str(),
                " is not in the exported dim order ",
                shape_str(std::vector<int64_t>(t.dim_order().begin(), t.dim_order().end())),
                "; a CUDA input must already be in the exported layout");
  const auto copy_to = [&](void* dst) -> Status {
    if (nbytes == 0) return {};
    if (!device_api_)
      return fail(Error::NotSupported, where(), ": input ", index, " on ", src.device.str(),
                  " must be copied into the method's memory, and copying CUDA memory needs CUDA-enabled bindings");
    if (auto s = device_api_->copy(dst, src.data, nbytes, CopyKind::DeviceToDevice, src.device.index); !s)
      return fail(s.error().code, where(), ": input ", index, ": ", s.error().what);
    return {};
  };
  if (meta.has_allocation) {  // a planned device input: the arena slot was bound at load
    ETRT_CHECK_OK(copy_to(t.data()));
    input_set_[index] = true;
    return InputBinding::Copied;
  }
  if (src.writable) {
    t.set_data(const_cast<void*>(src.data));
    input_set_[index] = true;
    return InputBinding::Aliased;
  }
  // A read-only device input must not be written by the method's in-place updates: give it a device copy.
  DeviceBuffer& staging = input_device_staging_[index];
  if (staging.size() < t.capacity_nbytes() || (!staging && t.capacity_nbytes() > 0)) {
    if (!device_api_)
      return fail(Error::NotSupported, where(), ": read-only input ", index, " on ", src.device.str(),
                  " must be copied, and copying CUDA memory needs CUDA-enabled bindings");
    auto buf = DeviceBuffer::allocate(*device_api_, t.capacity_nbytes(), src.device.index);
    if (!buf) return fail(buf.error().code, where(), ": input ", index, ": ", buf.error().what);
    staging = std::move(*buf);
  }
  t.set_data(staging.data());
  ETRT_CHECK_OK(copy_to(t.data()));
  input_set_[index] = true;
  return InputBinding::Copied;
}

inline Status Method::set_input(size_t index, const EValue& value) {
  if (index >= inputs_.size())
    return fail(Error::InvalidArgument, where(), ": input index ", index, " out of range (", inputs_.size(),
                " inputs)");
  const EValue& cur = *inputs_[index];
  const auto mismatch = [&](const std::string& got) {
    return fail(Error::InvalidArgument, where(), ": input ", index, " expected ", tag_name(cur.tag()), ", got ", got);
  };
  if (cur.is_tensor()) return mismatch(std::string(tag_name(value.tag())));
  if (cur.tag() != value.tag() && !(cur.is_double() && value.is_int()))
    return mismatch(std::string(tag_name(value.tag())));
  // Scalars are specialised at export: the graph was built for the exported value.
  bool equal = true;
  std::string exported, got;
  if (cur.is_int()) {
    equal = cur.int_unchecked() == value.int_unchecked();
    exported = std::to_string(cur.int_unchecked());
    got = std::to_string(value.int_unchecked());
  } else if (cur.is_bool()) {
    equal = cur.bool_unchecked() == value.bool_unchecked();
    exported = cur.bool_unchecked() ? "True" : "False";
    got = value.bool_unchecked() ? "True" : "False";
  } else if (cur.is_double()) {
    const double a = cur.double_unchecked(), b = value.is_int() ? static_cast<double>(value.int_unchecked())
                                                                 : value.double_unchecked();
    equal = std::abs(a - b) <= 1e-4 + 1e-5 * std::abs(b);
    exported = std::to_string(a);
    got = std::to_string(b);
  } else if (cur.is_string()) {
    equal = cur.string_unchecked() == value.string_unchecked();
    exported = std::string(cur.string_unchecked());
    got = std::string(value.string_unchecked());
  }
  if (!equal)
    return fail(Error::InvalidArgument, where(), ": input ", index, " was exported as the constant ", exported,
                "; got ", got, " (re-export to use another value)");
  input_set_[index] = true;
  return {};
}

inline Status Method::set_output_data_ptr(size_t index, void* data, size_t size_bytes) {
  if (index >= outputs_.size())
    return fail(Error::InvalidArgument, where(), ": output index ", index, " out of range (", outputs_.size(), ")");
  if (!output_needs_storage(index))
    return fail(Error::InvalidState, where(), ": output ", index, " is memory planned, a constant or an input");
  Tensor& t = outputs_[index]->tensor_unchecked();
  if (size_bytes < t.capacity_nbytes())
    return fail(Error::InvalidArgument, where(), ": output ", index, " needs ", t.capacity_nbytes(), " bytes, got ",
                size_bytes);
  t.set_data(data);
  return {};
}

inline Result<Tensor*> Method::attribute(std::string_view fqn) {
  if (auto it = value_by_fqn_.find(fqn); it != value_by_fqn_.end()) return &values_[it->second].tensor_unchecked();
  std::string known;
  for (const auto& a : meta_.attributes) known += cat(known.empty() ? "'" : ", '", a.fqn, "'");
  return fail(Error::NotFound, where(), " has no attribute '", fqn, "' (attributes: ",
              known.empty() ? std::string("none; export with emit_mutable_buffer_names=True") : known, ")");
}

inline bool Method::value_is_constant(const Tensor* t) const {
  // A value's tensor lives inside its EValue, so the value is found from the address (std::less: a total order
  // even for pointers into other objects).
  const auto* p = reinterpret_cast<const std::byte*>(t);
  const auto* begin = reinterpret_cast<const std::byte*>(values_.data());
  if (values_.empty() || std::less<>()(p, begin) || !std::less<>()(p, begin + values_.size() * sizeof(EValue)))
    return false;
  const size_t i = static_cast<size_t>(p - begin) / sizeof(EValue);
  return value_meta_[i] && values_[i].is_tensor() && &values_[i].tensor_unchecked() == t &&
         value_meta_[i]->is_constant();
}

inline std::optional<Device> Method::device_tensor_in(const EValue& v) const {
  const auto on_device = [](const Tensor* t) { return t && !t->device().is_cpu(); };
  if (v.is_tensor() && on_device(&v.tensor_unchecked())) return v.tensor_unchecked().device();
  if (const auto* l = std::get_if<TensorList>(&v.storage()))
    for (const Tensor* t : l->items)
      if (on_device(t)) return t->device();
  if (const auto* l = std::get_if<OptionalTensorList>(&v.storage()))
    for (const Tensor* t : l->items)
      if (on_device(t)) return t->device();
  return std::nullopt;
}

}  // namespace etrt
