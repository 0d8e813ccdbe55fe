// A small flatbuffer builder (no flatbuffers library); the writing counterpart of fb::Reader (flatbuffer.h).
//
// Note [back-to-front building]: like the upstream builders, the buffer grows from its end towards its start, so
// children are written before their parents and every uoffset points forward (towards the end). Positions are kept
// as distances from the end of the buffer (`Offset`), which stay valid while the buffer grows. Every scalar is
// aligned relative to the end; `finish` pads the front so that the total size is a multiple of the largest
// alignment used, which makes every scalar aligned relative to byte 0 as well (including the 4-byte size prefix,
// which is part of the aligned buffer).
//
// Usage (children first):
//   Builder b;
//   auto name = b.create_string("x");
//   b.start_table();
//   b.add_scalar<int32_t>(1, value, /*def=*/-1);   // omitted when equal to the schema default
//   b.add_offset(0, name);                          // omitted when 0 (absent)
//   auto t = b.end_table();
//   std::vector<uint8_t> bytes = b.finish(t, "ID00", /*size_prefixed=*/false);
//
// Tables may not be nested while open (build the child first, then reference it), as with flatc. Identical vtables
// are shared. Misuse (nested start_table, building a string inside an open table) is an assert in debug builds.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace etrt::fb {

class Builder {
 public:
  /// A written object: its distance from the end of the buffer; 0 = none/absent.
  using Offset = uint32_t;

  explicit Builder(size_t initial_capacity = 1024) : buf_(std::max<size_t>(initial_capacity, 64)), head_(buf_.size()) {}

  /// Bytes written so far (the distance from the current front to the end).
  uint32_t size() const { return static_cast<uint32_t>(buf_.size() - head_); }

  // ---- strings and vectors (not while a table is open) ----

  /// A string: u32 length, the bytes, a NUL (not counted).
  Offset create_string(std::string_view s) {
    assert(!in_table_);
    prep(4, s.size() + 1);
    push_bytes("", 1);
    push_bytes(s.data(), s.size());
    push_raw<uint32_t>(static_cast<uint32_t>(s.size()));
    return size();
  }

  /// A vector of scalars. `force_align` (a power of two >= the element's alignment) aligns the element data.
  template <class T>
    requires std::is_arithmetic_v<T>
  Offset create_vector(std::span<const T> v, size_t force_align = 0) {
    assert(!in_table_);
    const size_t bytes = v.size() * sizeof(T);
    prep(4, bytes);
    prep(std::max(alignof(T), force_align), bytes);
    for (size_t i = v.size(); i-- > 0;) push_raw<T>(v[i]);
    push_raw<uint32_t>(static_cast<uint32_t>(v.size()));
    return size();
  }
  template <class T>
    requires std::is_arithmetic_v<T>
  Offset create_vector(const std::vector<T>& v, size_t force_align = 0) {
    return create_vector(std::span<const T>(v), force_align);
  }

  /// A vector of tables (or strings / vectors): u32 count, then one uoffset per element.
  Offset create_offset_vector(std::span<const Offset> v) {
    assert(!in_table_);
    prep(4, v.size() * 4);
    for (size_t i = v.size(); i-- > 0;) push_uoffset(v[i]);
    push_raw<uint32_t>(static_cast<uint32_t>(v.size()));
    return size();
  }
  Offset create_offset_vector(const std::vector<Offset>& v) { return create_offset_vector(std::span<const Offset>(v)); }

  // ---- tables ----

  void start_table() {
    assert(!in_table_);
    in_table_ = true;
    fields_.clear();
  }

  /// A scalar field; omitted when equal to `def` (the schema default, which may be non-zero).
  template <class T>
    requires std::is_arithmetic_v<T>
  void add_scalar(int slot, T value, T def) {
    if (value == def) return;
    add_scalar_always(slot, value);
  }

  /// A scalar field written even when it equals the default.
  template <class T>
    requires std::is_arithmetic_v<T>
  void add_scalar_always(int slot, T value) {
    assert(in_table_);
    prep(sizeof(T), 0);
    push_raw<T>(value);
    fields_.push_back({slot, size(), sizeof(T)});
  }

  /// An offset field (string, vector or table); omitted when `target` is 0.
  void add_offset(int slot, Offset target) {
    assert(in_table_);
    if (target == 0) return;
    prep(4, 0);
    push_uoffset(target);
    fields_.push_back({slot, size(), 4});
  }

  /// Closes the table: writes its soffset and (or shares) its vtable.
  Offset end_table() {
    assert(in_table_);
    prep(4, 0);
    push_raw<int32_t>(0);  // soffset, patched below
    const Offset table = size();

    // Inline size: soffset + fields, not counting alignment padding before the first field written (so that equal
    // tables get equal, shareable vtables wherever they sit).
    int num_slots = 0;
    Offset data_end = table - 4;
    for (const auto& f : fields_) {
      num_slots = std::max(num_slots, f.slot + 1);
      data_end = std::min<Offset>(data_end, f.pos - f.size);
    }
    std::vector<uint16_t> vt(2 + static_cast<size_t>(num_slots), 0);
    vt[0] = static_cast<uint16_t>(vt.size() * 2);
    vt[1] = static_cast<uint16_t>(table - data_end);
    for (const auto& f : fields_) vt[2 + static_cast<size_t>(f.slot)] = static_cast<uint16_t>(table - f.pos);

    Offset vtable = 0;
    for (Offset cand : vtables_) {
      const uint8_t* p = at(cand);
      if (load<uint16_t>(p) == vt[0] && std::memcmp(p, vt.data(), vt[0]) == 0) {
        vtable = cand;
        break;
      }
    }
    if (vtable == 0) {
      // Written directly in front of the table (u16s; the table start is 4-aligned, so they are 2-aligned).
      for (size_t i = vt.size(); i-- > 0;) push_raw<uint16_t>(vt[i]);
      vtable = size();
      vtables_.push_back(vtable);
    }
    // vtable position = table position - soffset; positions are (total - distance).
    const int32_t soff = static_cast<int32_t>(static_cast<int64_t>(vtable) - static_cast<int64_t>(table));
    std::memcpy(at(table), &soff, 4);
    in_table_ = false;
    fields_.clear();
    return table;
  }

  // ---- finishing ----

  /// Writes the root offset, the 4-byte identifier (empty = none) and optionally a u32 size prefix (= total - 4),
  /// and returns the finished bytes. The builder is left empty.
  std::vector<uint8_t> finish(Offset root, std::string_view identifier = {}, bool size_prefixed = false) {
    assert(!in_table_);
    assert(identifier.empty() || identifier.size() == 4);
    const size_t extra = 4 + (identifier.empty() ? 0 : 4) + (size_prefixed ? 4 : 0);
    prep(std::max<size_t>(minalign_, 4), extra);
    if (!identifier.empty()) push_bytes(identifier.data(), 4);
    push_uoffset(root);
    if (size_prefixed) push_raw<uint32_t>(size());
    std::vector<uint8_t> out(buf_.begin() + static_cast<std::ptrdiff_t>(head_), buf_.end());
    clear();
    return out;
  }

  void clear() {
    head_ = buf_.size();
    minalign_ = 1;
    vtables_.clear();
    fields_.clear();
    in_table_ = false;
  }

 private:
  struct Field {
    int slot;
    Offset pos;   // distance of the field's first byte from the end
    Offset size;  // bytes
  };

  uint8_t* at(Offset off) { return buf_.data() + (buf_.size() - off); }
  template <class T>
  static T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }

  void reserve_front(size_t n) {
    if (n <= head_) return;
    const size_t used = size();
    size_t cap = buf_.size();
    while (cap - used < n) cap *= 2;
    std::vector<uint8_t> nb(cap);
    std::memcpy(nb.data() + (cap - used), buf_.data() + head_, used);
    buf_.swap(nb);
    head_ = cap - used;
  }

  /// Pads so that, after `additional` more bytes, the size is a multiple of `align` (a power of two).
  void prep(size_t align, size_t additional) {
    minalign_ = std::max(minalign_, align);
    const size_t pad = (~(static_cast<size_t>(size()) + additional) + 1) & (align - 1);
    reserve_front(pad + additional);
    head_ -= pad;
    std::memset(buf_.data() + head_, 0, pad);
  }

  void push_bytes(const void* p, size_t n) {
    reserve_front(n);
    head_ -= n;
    if (n) std::memcpy(buf_.data() + head_, p, n);
  }

  template <class T>
  void push_raw(T v) {
    push_bytes(&v, sizeof(T));  // little-endian hosts only (as is the reader)
  }

  /// A uoffset to `target`, relative to where it is stored (caller has 4-aligned the position).
  void push_uoffset(Offset target) {
    assert(target != 0 && target <= size());
    push_raw<uint32_t>(size() + 4 - target);
  }

  std::vector<uint8_t> buf_;
  size_t head_;
  size_t minalign_ = 1;
  bool in_table_ = false;
  std::vector<Field> fields_;
  std::vector<Offset> vtables_;
};

}  // namespace etrt::fb
