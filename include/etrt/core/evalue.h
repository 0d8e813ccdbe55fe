// EValue: one entry of a method's value table.
//
// List values refer to other entries of the same table (Note [list items are value indices]): IntList items are
// Int values, TensorList items are Tensor values. The table is allocated once per Method and never grows, so the
// pointers stay valid for the Method's lifetime.
#pragma once

#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "etrt/core/tensor.h"

namespace etrt {

/// Upstream's Tag names, which Python reprs print for non-tensor values.
enum class Tag : uint8_t {
  None,
  Tensor,
  String,
  Double,
  Int,
  Bool,
  ListBool,
  ListDouble,
  ListInt,
  ListTensor,
  ListScalar,
  ListOptionalTensor,
};

constexpr std::string_view tag_name(Tag t) {
  constexpr std::string_view kNames[] = {"None",     "Tensor",     "String",  "Double",     "Int",        "Bool",
                                         "ListBool", "ListDouble", "ListInt", "ListTensor", "ListScalar",
                                         "ListOptionalTensor"};
  return kNames[static_cast<int>(t)];
}

/// A Scalar argument: an int, a double or a bool as the program encoded it.
struct Scalar {
  std::variant<int64_t, double, bool> v{int64_t{0}};
  bool is_floating() const { return v.index() == 1; }
  bool is_integral() const { return v.index() == 0; }
  bool is_bool() const { return v.index() == 2; }
  double to_double() const {
    return std::visit([](auto x) { return static_cast<double>(x); }, v);
  }
  /// A double is truncated toward zero and saturates to int64's range (NaN gives 0): a file's scalar can hold any
  /// double, and an out-of-range conversion would be undefined behaviour.
  int64_t to_int() const {
    return std::visit(
        [](auto x) -> int64_t {
          if constexpr (std::is_floating_point_v<decltype(x)>) {
            if (!(x == x)) return 0;
            if (x <= -0x1p63) return std::numeric_limits<int64_t>::min();
            if (x >= 0x1p63) return std::numeric_limits<int64_t>::max();
          }
          return static_cast<int64_t>(x);
        },
        v);
  }
};

class EValue;

struct IntList {
  std::vector<const EValue*> items;
  // Refreshed from `items` at each use, so an Int value changed by a MoveCall is seen. Never resized after load.
  mutable std::vector<int64_t> cache;
};
struct TensorList {
  std::vector<Tensor*> items;
};
struct OptionalTensorList {
  std::vector<Tensor*> items;  // nullptr = None
};

class EValue {
 public:
  using Storage = std::variant<std::monostate, Tensor, std::string_view, double, int64_t, bool, std::vector<bool>,
                               std::vector<double>, IntList, TensorList, OptionalTensorList>;

  EValue() = default;
  explicit EValue(Tensor t) : v_(std::move(t)) {}
  explicit EValue(int64_t i) : v_(i) {}
  explicit EValue(double d) : v_(d) {}
  explicit EValue(bool b) : v_(b) {}
  explicit EValue(std::string_view s) : v_(s) {}
  explicit EValue(Storage s) : v_(std::move(s)) {}

  Tag tag() const {
    constexpr Tag kTags[] = {Tag::None,     Tag::Tensor,     Tag::String,  Tag::Double,
                             Tag::Int,      Tag::Bool,       Tag::ListBool, Tag::ListDouble,
                             Tag::ListInt,  Tag::ListTensor, Tag::ListOptionalTensor};
    return kTags[v_.index()];
  }
  bool is_none() const { return v_.index() == 0; }
  bool is_tensor() const { return std::holds_alternative<Tensor>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_double() const { return std::holds_alternative<double>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_string() const { return std::holds_alternative<std::string_view>(v_); }

  // Unchecked accessors: only after the tag was checked (at load, or by the caller).
  Tensor& tensor_unchecked() { return std::get<Tensor>(v_); }
  const Tensor& tensor_unchecked() const { return std::get<Tensor>(v_); }
  int64_t int_unchecked() const { return std::get<int64_t>(v_); }
  double double_unchecked() const { return std::get<double>(v_); }
  bool bool_unchecked() const { return std::get<bool>(v_); }
  std::string_view string_unchecked() const { return std::get<std::string_view>(v_); }

  Storage& storage() { return v_; }
  const Storage& storage() const { return v_; }

  // ---- checked accessors used by the generated kernel wrappers; `arg` names the argument in messages ----

  Result<Tensor*> to_tensor(std::string_view arg) {
    if (auto* t = std::get_if<Tensor>(&v_)) return t;
    return mismatch(arg, "Tensor");
  }
  Result<const Tensor*> to_optional_tensor(std::string_view arg) {
    if (is_none()) return static_cast<const Tensor*>(nullptr);
    if (auto* t = std::get_if<Tensor>(&v_)) return static_cast<const Tensor*>(t);
    return mismatch(arg, "Tensor?");
  }
  Result<int64_t> to_int(std::string_view arg) const {
    if (auto* i = std::get_if<int64_t>(&v_)) return *i;
    if (auto* b = std::get_if<bool>(&v_)) return static_cast<int64_t>(*b);
    return mismatch(arg, "int");
  }
  Result<double> to_double(std::string_view arg) const {
    if (auto* d = std::get_if<double>(&v_)) return *d;
    if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
    return mismatch(arg, "float");
  }
  Result<bool> to_bool(std::string_view arg) const {
    if (auto* b = std::get_if<bool>(&v_)) return *b;
    return mismatch(arg, "bool");
  }
  Result<Scalar> to_scalar(std::string_view arg) const {
    if (auto* i = std::get_if<int64_t>(&v_)) return Scalar{*i};
    if (auto* d = std::get_if<double>(&v_)) return Scalar{*d};
    if (auto* b = std::get_if<bool>(&v_)) return Scalar{*b};
    // A rank-0 / one-element tensor where a Scalar is expected (e.g. scalar_tensor outputs fed back).
    if (auto* t = std::get_if<Tensor>(&v_); t && t->numel() == 1 && t->data()) return tensor_item(*t);
    return mismatch(arg, "Scalar");
  }
  Result<std::string_view> to_string(std::string_view arg) const {
    if (auto* s = std::get_if<std::string_view>(&v_)) return *s;
    return mismatch(arg, "str");
  }
  Result<std::span<const int64_t>> to_int_list(std::string_view arg) const {
    if (auto* l = std::get_if<IntList>(&v_)) {
      for (size_t i = 0; i < l->items.size(); ++i) {
        const EValue* item = l->items[i];
        if (!item->is_int()) return fail(Error::InvalidArgument, "argument '", arg, "': list item ", i, " is ",
                                         tag_name(item->tag()), ", expected Int");
        l->cache[i] = item->int_unchecked();
      }
      return std::span<const int64_t>(l->cache);
    }
    if (auto* i = std::get_if<int64_t>(&v_)) {  // an int where int[] is expected broadcasts as [i]
      single_ = *i;
      return std::span<const int64_t>(&single_, 1);
    }
    return mismatch(arg, "int[]");
  }
  Result<std::span<const double>> to_double_list(std::string_view arg) const {
    if (auto* l = std::get_if<std::vector<double>>(&v_)) return std::span<const double>(*l);
    return mismatch(arg, "float[]");
  }
  Result<const std::vector<bool>*> to_bool_list(std::string_view arg) const {
    if (auto* l = std::get_if<std::vector<bool>>(&v_)) return l;
    return mismatch(arg, "bool[]");
  }
  Result<std::span<Tensor* const>> to_tensor_list(std::string_view arg) const {
    if (auto* l = std::get_if<TensorList>(&v_)) return std::span<Tensor* const>(l->items);
    return mismatch(arg, "Tensor[]");
  }
  Result<std::span<Tensor* const>> to_optional_tensor_list(std::string_view arg) const {
    if (auto* l = std::get_if<OptionalTensorList>(&v_)) return std::span<Tensor* const>(l->items);
    if (auto* l = std::get_if<TensorList>(&v_)) return std::span<Tensor* const>(l->items);
    return mismatch(arg, "Tensor?[]");
  }

  template <class T, class F>
  auto optional(std::string_view /*arg*/, F&& get) const -> Result<std::optional<T>> {
    if (is_none()) return std::optional<T>{};
    auto r = get();
    if (!r) return std::move(r).error();
    return std::optional<T>{std::move(*r)};
  }

 private:
  [[gnu::cold]] Failure mismatch(std::string_view arg, std::string_view expected) const {
    return fail(Error::InvalidArgument, "argument '", arg, "' expected ", expected, ", got ", tag_name(tag()));
  }
  static Scalar tensor_item(const Tensor& t) {
    const void* p = t.data();
    switch (t.dtype()) {
      case ScalarType::Bool: return Scalar{*static_cast<const uint8_t*>(p) != 0};
      case ScalarType::Float: return Scalar{static_cast<double>(*static_cast<const float*>(p))};
      case ScalarType::Double: return Scalar{*static_cast<const double*>(p)};
      case ScalarType::Half: return Scalar{static_cast<double>(static_cast<float>(*static_cast<const Half*>(p)))};
      case ScalarType::BFloat16:
        return Scalar{static_cast<double>(static_cast<float>(*static_cast<const BFloat16*>(p)))};
      case ScalarType::Byte: return Scalar{static_cast<int64_t>(*static_cast<const uint8_t*>(p))};
      case ScalarType::Char: return Scalar{static_cast<int64_t>(*static_cast<const int8_t*>(p))};
      case ScalarType::Short: return Scalar{static_cast<int64_t>(*static_cast<const int16_t*>(p))};
      case ScalarType::Int: return Scalar{static_cast<int64_t>(*static_cast<const int32_t*>(p))};
      default: return Scalar{*static_cast<const int64_t*>(p)};
    }
  }

  Storage v_;
  mutable int64_t single_ = 0;
};

}  // namespace etrt
