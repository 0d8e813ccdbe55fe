// A bounds-checked flatbuffer reader (no flatbuffers library).
//
// Note [sticky reader errors]: every accessor checks the offsets, vtable, lengths and alignment it touches. On the
// first violation the Reader records a Failure naming the field, and from then on every accessor returns an empty
// value. Callers read a whole structure, then check `reader.ok()` once: bad bytes are an error, never a crash, and
// parsing code stays linear.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "etrt/core/result.h"

namespace etrt::fb {

class Reader;

/// Loads a little-endian scalar from any offset (memcpy: no alignment assumption).
template <class T>
inline T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// A vector of scalars inside the buffer.
template <class T>
class Vector {
 public:
  Vector() = default;
  Vector(const uint8_t* data, uint32_t size) : data_(data), size_(size) {}
  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T operator[](uint32_t i) const { return load_le<T>(data_ + static_cast<size_t>(i) * sizeof(T)); }
  const uint8_t* bytes() const { return data_; }

 private:
  const uint8_t* data_ = nullptr;
  uint32_t size_ = 0;
};

/// A table inside the buffer; a default-constructed Table is "absent" and reads every field as its default.
class Table {
 public:
  Table() = default;
  Table(const Reader* r, uint32_t pos, uint32_t vtable, uint16_t vtable_size)
      : r_(r), pos_(pos), vtable_(vtable), vtable_size_(vtable_size) {}
  bool present() const { return r_ != nullptr; }
  uint32_t pos() const { return pos_; }

  /// Byte offset of `slot`'s field from the table start, 0 when absent (also for slots past a short vtable).
  uint16_t field_offset(int slot) const;
  /// Where the offset stored in field `slot` points (0 when the field is absent or the reader failed).
  uint64_t referenced(int slot, std::string_view field) const;
  /// Number of slots the vtable has room for.
  int num_slots() const { return vtable_size_ >= 4 ? (vtable_size_ - 4) / 2 : 0; }

  template <class T>
  T scalar(int slot, T def, std::string_view field) const;
  Table table(int slot, std::string_view field) const;
  std::string_view string(int slot, std::string_view field, bool* present = nullptr) const;
  template <class T>
  Vector<T> vector(int slot, std::string_view field, bool* present = nullptr) const;
  /// A vector of tables: element i via `at`.
  class TableVector;
  TableVector tables(int slot, std::string_view field, bool* present = nullptr) const;

 private:
  const Reader* r_ = nullptr;
  uint32_t pos_ = 0;
  uint32_t vtable_ = 0;
  uint16_t vtable_size_ = 0;
};

class Table::TableVector {
 public:
  TableVector() = default;
  TableVector(const Reader* r, uint32_t data_pos, uint32_t size, std::string_view field)
      : r_(r), data_pos_(data_pos), size_(size), field_(field) {}
  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Table at(uint32_t i) const;

 private:
  const Reader* r_ = nullptr;
  uint32_t data_pos_ = 0;
  uint32_t size_ = 0;
  std::string_view field_;
};

class Reader {
 public:
  /// `what` names the format in messages ("program", "bundled program", ...).
  Reader(std::span<const uint8_t> bytes, std::string_view what) : bytes_(bytes), what_(what) {}

  bool ok() const { return !failed_; }
  const Failure& failure() const { return failure_; }
  Failure take_failure() const { return failure_; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

  /// The root table, whose uoffset sits at `prefix` (4 for size-prefixed buffers).
  Table root(size_t prefix = 0) const {
    if (!in_bounds(prefix, 8)) return error_table("root offset: buffer of ", size(), " bytes is too small");
    const uint32_t off = load_le<uint32_t>(bytes_.data() + prefix);
    const uint64_t pos = static_cast<uint64_t>(prefix) + off;
    return table_at(pos, "root");
  }

  /// Identifier bytes (4) after the root offset.
  std::string_view identifier(size_t prefix = 0) const {
    if (!in_bounds(prefix + 4, 4)) return {};
    return {reinterpret_cast<const char*>(bytes_.data() + prefix + 4), 4};
  }

  // ---- used by Table; bounds-checked primitives ----

  bool in_bounds(uint64_t pos, uint64_t len) const { return pos <= bytes_.size() && len <= bytes_.size() - pos; }

  template <class... Ts>
  void set_error(const Ts&... pieces) const {
    if (failed_) return;
    failed_ = true;
    failure_ = fail(Error::InvalidProgram, what_, ": ", pieces...);
  }

  template <class... Ts>
  Table error_table(const Ts&... pieces) const {
    set_error(pieces...);
    return {};
  }

  Table table_at(uint64_t pos, std::string_view field) const {
    if (failed_) return {};
    if (pos % 4 != 0 || !in_bounds(pos, 4)) return error_table("table '", field, "' at ", pos, " is out of bounds");
    const int32_t soff = load_le<int32_t>(bytes_.data() + pos);
    const int64_t vt = static_cast<int64_t>(pos) - soff;
    if (vt < 0 || vt % 2 != 0 || !in_bounds(static_cast<uint64_t>(vt), 4))
      return error_table("vtable of '", field, "' at ", vt, " is out of bounds");
    const uint16_t vt_size = load_le<uint16_t>(bytes_.data() + vt);
    const uint16_t inline_size = load_le<uint16_t>(bytes_.data() + vt + 2);
    if (vt_size < 4 || vt_size % 2 != 0 || !in_bounds(static_cast<uint64_t>(vt), vt_size))
      return error_table("vtable of '", field, "' has invalid size ", vt_size);
    if (inline_size < 4 || !in_bounds(pos, inline_size))
      return error_table("table '", field, "' inline size ", inline_size, " exceeds the buffer");
    Table t(this, static_cast<uint32_t>(pos), static_cast<uint32_t>(vt), vt_size);
    table_inline_size_ = inline_size;
    return t;
  }

  /// Follows the uoffset stored at `pos`; returns the target or 0 after recording an error.
  uint64_t follow(uint64_t pos, std::string_view field) const {
    if (failed_) return 0;
    if (!in_bounds(pos, 4)) {
      set_error("offset of '", field, "' is out of bounds");
      return 0;
    }
    const uint32_t off = load_le<uint32_t>(bytes_.data() + pos);
    const uint64_t target = pos + off;
    if (off == 0 || !in_bounds(target, 4)) {
      set_error("'", field, "' points outside the buffer (", target, " of ", size(), ")");
      return 0;
    }
    return target;
  }

  /// Validates a vector header at `pos` with elements of `elem` bytes aligned to `align`; returns its count.
  bool vector_at(uint64_t pos, size_t elem, size_t align, std::string_view field, uint32_t* count) const {
    const uint32_t n = load_le<uint32_t>(bytes_.data() + pos);
    const uint64_t data = pos + 4;
    if (!in_bounds(data, static_cast<uint64_t>(n) * elem)) {
      set_error("vector '", field, "' of ", n, " elements overruns the buffer");
      return false;
    }
    (void)align;
    *count = n;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  std::string_view what_;
  mutable bool failed_ = false;
  mutable Failure failure_;
  mutable uint16_t table_inline_size_ = 0;
};

inline uint16_t Table::field_offset(int slot) const {
  if (!r_) return 0;
  const uint32_t entry = 4 + 2 * static_cast<uint32_t>(slot);
  if (entry + 2 > vtable_size_) return 0;  // a vtable shorter than the schema: trailing slots absent
  return load_le<uint16_t>(r_->bytes().data() + vtable_ + entry);
}

template <class T>
inline T Table::scalar(int slot, T def, std::string_view field) const {
  const uint16_t fo = field_offset(slot);
  if (fo == 0 || !r_->ok()) return def;
  const uint64_t pos = static_cast<uint64_t>(pos_) + fo;
  if (!r_->in_bounds(pos, sizeof(T))) {
    r_->set_error("field '", field, "' is out of bounds");
    return def;
  }
  return load_le<T>(r_->bytes().data() + pos);
}

inline uint64_t Table::referenced(int slot, std::string_view field) const {
  const uint16_t fo = field_offset(slot);
  if (fo == 0 || !r_->ok()) return 0;
  const uint64_t target = r_->follow(static_cast<uint64_t>(pos_) + fo, field);
  return r_->ok() ? target : 0;
}

inline Table Table::table(int slot, std::string_view field) const {
  const uint64_t target = referenced(slot, field);
  if (target == 0) return {};
  return r_->table_at(target, field);
}

inline std::string_view Table::string(int slot, std::string_view field, bool* present) const {
  if (present) *present = false;
  const uint64_t target = referenced(slot, field);
  if (target == 0) return {};
  uint32_t n = 0;
  if (!r_->vector_at(target, 1, 1, field, &n)) return {};
  // The terminating NUL must be inside the buffer too.
  if (!r_->in_bounds(target + 4, static_cast<uint64_t>(n) + 1)) {
    r_->set_error("string '", field, "' is not terminated inside the buffer");
    return {};
  }
  if (present) *present = true;
  return {reinterpret_cast<const char*>(r_->bytes().data() + target + 4), n};
}

template <class T>
inline Vector<T> Table::vector(int slot, std::string_view field, bool* present) const {
  if (present) *present = false;
  const uint64_t target = referenced(slot, field);
  if (target == 0) return {};
  uint32_t n = 0;
  if (!r_->vector_at(target, sizeof(T), alignof(T), field, &n)) return {};
  if (present) *present = true;
  return Vector<T>(r_->bytes().data() + target + 4, n);
}

inline Table::TableVector Table::tables(int slot, std::string_view field, bool* present) const {
  if (present) *present = false;
  const uint64_t target = referenced(slot, field);
  if (target == 0) return {};
  uint32_t n = 0;
  if (!r_->vector_at(target, 4, 4, field, &n)) return {};
  if (present) *present = true;
  return TableVector(r_, static_cast<uint32_t>(target + 4), n, field);
}

inline Table Table::TableVector::at(uint32_t i) const {
  if (!r_ || i >= size_ || !r_->ok()) return {};
  const uint64_t slot_pos = static_cast<uint64_t>(data_pos_) + 4ull * i;
  const uint64_t target = r_->follow(slot_pos, field_);
  if (!r_->ok()) return {};
  return r_->table_at(target, field_);
}

}  // namespace etrt::fb
