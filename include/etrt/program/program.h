// Program: a loaded .pte. Checks the container once, then hands out methods, constants and segments.
//
//   auto src = DataSource::from_file("model.pte");          // or DataSource::copy_of(bytes)
//   auto program = Program::load(*src);                       // Result<std::shared_ptr<const Program>>
//   auto method = Method::load(*program, "forward", etrt::generated::portable_kernels());
//
// The Program keeps its DataSource alive; Methods keep their Program alive.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "etrt/core/utf8.h"
#include "etrt/format/pte_header.h"
#include "etrt/program/data_source.h"
#include "etrt/program/method_meta.h"

namespace etrt {

/// How thoroughly Program::load checks the file. Both levels check every offset this runtime reads; the full
/// level also parses every method's signature at load, so a corrupt method fails the load rather than its first use.
enum class Verification : uint8_t { Minimal = 0, InternalConsistency = 1 };

struct Segment {
  uint64_t offset = 0;  // relative to the segment base
  uint64_t size = 0;
};

class Program {
 public:
  static Result<std::shared_ptr<const Program>> load(std::shared_ptr<const DataSource> source,
                                                     Verification verification = Verification::Minimal) {
    return errors_as_values("program", [&] { return load_unguarded(std::move(source), verification); });
  }

  size_t num_methods() const { return plans_.size(); }
  Result<std::string_view> get_method_name(size_t index) const {
    if (index >= plans_.size())
      return fail(Error::InvalidArgument, "method index ", index, " out of range (", plans_.size(), " methods)");
    return std::string_view(plans_[index].name);
  }
  std::vector<std::string> method_names() const {
    std::vector<std::string> names;
    for (const auto& p : plans_) names.push_back(p.name);
    return names;
  }
  bool has_method(std::string_view name) const { return find_plan(name) != nullptr; }
  Result<MethodMeta> method_meta(std::string_view name) const;

  /// `nbytes` of constant data for data_buffer_idx `index`, bounds-checked against its storage.
  Result<const uint8_t*> constant_data(uint32_t index, size_t nbytes) const;
  /// The bytes of segment `index` (absolute range checked against the file).
  Result<std::span<const uint8_t>> segment(uint32_t index) const;
  /// Initial bytes of a planned tensor with data_buffer_idx > 0 (mutable_data_segments[0]).
  Result<const uint8_t*> mutable_data(uint32_t index, size_t nbytes) const;
  /// Inline delegate payload `index` (backend_delegate_data).
  Result<std::span<const uint8_t>> inline_delegate_data(uint32_t index) const;
  /// A blob of the PTE's own named_data.
  Result<std::span<const uint8_t>> named_data(std::string_view key) const;

  std::span<const uint8_t> flatbuffer() const { return source_->bytes().subspan(0, program_size_); }
  const DataSource& source() const { return *source_; }
  std::shared_ptr<const DataSource> source_ptr() const { return source_; }

  /// Position of the ExecutionPlan table named `name` in flatbuffer(), for method loading.
  struct PlanRef {
    std::string name;
    uint32_t table_pos;
  };
  const PlanRef* find_plan(std::string_view name) const {
    for (const auto& p : plans_)
      if (p.name == name) return &p;
    return nullptr;
  }
  Failure unknown_method(std::string_view name) const {
    std::string known;
    for (const auto& p : plans_) known += (known.empty() ? "'" : ", '") + p.name + "'";
    return fail(Error::InvalidArgument, "unknown method '", name, "'; the program has ", known);
  }

 private:
  static Result<std::shared_ptr<const Program>> load_unguarded(std::shared_ptr<const DataSource> source,
                                                               Verification verification);
  Program() = default;
  Result<std::span<const uint8_t>> segment_bytes(uint32_t index, std::string_view what) const;

  std::shared_ptr<const DataSource> source_;
  uint64_t program_size_ = 0;
  uint64_t segment_base_ = 0;  // 0 = the file has no segment data
  std::vector<PlanRef> plans_;
  std::vector<Segment> segments_;
  // Constants: either the constant segment with one offset per data_buffer_idx, or the deprecated inline buffers.
  bool constants_in_segment_ = false;
  uint32_t constant_segment_index_ = 0;
  std::vector<uint64_t> constant_offsets_;
  std::vector<std::span<const uint8_t>> constant_buffers_;
  bool has_mutable_segment_ = false;
  uint32_t mutable_segment_index_ = 0;
  std::vector<uint64_t> mutable_offsets_;
  std::vector<std::span<const uint8_t>> inline_delegates_;
  std::vector<std::pair<std::string_view, uint32_t>> named_data_;
};

inline Result<std::shared_ptr<const Program>> Program::load_unguarded(std::shared_ptr<const DataSource> source,
                                                                      Verification verification) {
  namespace P = pte::program;
  const auto file = source->bytes();
  if (file.size() < 8) return fail(Error::InvalidProgram, "program: file of ", file.size(), " bytes is too small");
  const std::string_view ident(reinterpret_cast<const char*>(file.data()) + 4, 4);
  if (ident == "BP08")
    return fail(Error::InvalidProgram,
                "program: this is a bundled program (identifier BP08); load it with _load_bundled_program_from_buffer");
  if (ident != "ET12") {
    if (ident.substr(0, 2) == "ET")
      return fail(Error::InvalidProgram, "program: identifier '", ident,
                  "' is an ExecuTorch program of an incompatible version (expected 'ET12')");
    return fail(Error::InvalidProgram, "program: not an ExecuTorch program (identifier bytes 4..7 are not 'ET12')");
  }
  ETRT_TRY(pte::ExtendedHeader header, pte::parse_extended_header(file));

  auto program = std::shared_ptr<Program>(new Program());
  program->source_ = source;
  program->program_size_ = header.program_size;
  program->segment_base_ = header.segment_base_offset;

  fb::Reader r(file.subspan(0, header.program_size), "program");
  const fb::Table root = r.root();
  if (!r.ok()) return r.take_failure();
  const uint32_t root_off = fb::load_le<uint32_t>(file.data());
  if (root_off < 8 || root_off > header.program_size - 4)
    return fail(Error::InvalidProgram, "program: root offset ", root_off, " is out of range");

  bool has_plans = false;
  const auto plans = root.tables(P::execution_plan, "Program.execution_plan", &has_plans);
  if (!r.ok()) return r.take_failure();
  if (!has_plans) return fail(Error::InvalidProgram, "program: no execution_plan");
  for (uint32_t i = 0; i < plans.size(); ++i) {
    const fb::Table plan = plans.at(i);
    bool has_name = false;
    const std::string_view name = plan.string(pte::plan::name, "ExecutionPlan.name", &has_name);
    if (!r.ok()) return r.take_failure();
    if (!has_name) return fail(Error::InvalidProgram, "program: execution plan ", i, " has no name");
    if (!is_valid_utf8(name))
      return fail(Error::InvalidProgram, "program: the name of execution plan ", i, " is not valid UTF-8");
    program->plans_.push_back({std::string(name), plan.pos()});
  }

  const auto segments = root.tables(P::segments, "Program.segments");
  for (uint32_t i = 0; i < segments.size(); ++i) {
    const fb::Table s = segments.at(i);
    program->segments_.push_back({s.scalar<uint64_t>(pte::data_segment::offset, 0, "DataSegment.offset"),
                                  s.scalar<uint64_t>(pte::data_segment::size, 0, "DataSegment.size")});
  }

  const fb::Table cseg = root.table(P::constant_segment, "Program.constant_segment");
  const auto offsets = cseg.vector<uint64_t>(pte::subsegment::offsets, "SubsegmentOffsets.offsets");
  const auto cbuf = root.tables(P::constant_buffer, "Program.constant_buffer");
  if (!r.ok()) return r.take_failure();
  if (offsets.size() > 1) {
    if (!cbuf.empty())
      return fail(Error::InvalidProgram, "program: both constant_segment and constant_buffer hold constants");
    program->constants_in_segment_ = true;
    program->constant_segment_index_ = cseg.scalar<uint32_t>(pte::subsegment::segment_index, 0, "segment_index");
    for (uint32_t i = 0; i < offsets.size(); ++i) program->constant_offsets_.push_back(offsets[i]);
    ETRT_CHECK_OK(program->segment_bytes(program->constant_segment_index_, "constant segment"));
  } else {
    for (uint32_t i = 0; i < cbuf.size(); ++i) {
      const auto storage = cbuf.at(i).vector<uint8_t>(pte::buffer::storage, "Buffer.storage");
      program->constant_buffers_.emplace_back(storage.bytes(), storage.size());
    }
  }

  const auto msegs = root.tables(P::mutable_data_segments, "Program.mutable_data_segments");
  if (!msegs.empty()) {
    const fb::Table m0 = msegs.at(0);
    program->has_mutable_segment_ = true;
    program->mutable_segment_index_ = m0.scalar<uint32_t>(pte::subsegment::segment_index, 0, "segment_index");
    const auto moffs = m0.vector<uint64_t>(pte::subsegment::offsets, "SubsegmentOffsets.offsets");
    for (uint32_t i = 0; i < moffs.size(); ++i) program->mutable_offsets_.push_back(moffs[i]);
  }

  const auto inline_data = root.tables(P::backend_delegate_data, "Program.backend_delegate_data");
  for (uint32_t i = 0; i < inline_data.size(); ++i) {
    const auto d = inline_data.at(i).vector<uint8_t>(pte::inline_data::data, "BackendDelegateInlineData.data");
    program->inline_delegates_.emplace_back(d.bytes(), d.size());
  }
  const auto named = root.tables(P::named_data, "Program.named_data");
  for (uint32_t i = 0; i < named.size(); ++i) {
    const fb::Table n = named.at(i);
    program->named_data_.emplace_back(n.string(pte::named_data::key, "NamedData.key"),
                                      n.scalar<uint32_t>(pte::named_data::segment_index, 0, "segment_index"));
  }
  if (!r.ok()) return r.take_failure();

  if (verification == Verification::InternalConsistency) {
    for (const auto& p : program->plans_) ETRT_CHECK_OK(program->method_meta(p.name));
  }
  return std::shared_ptr<const Program>(std::move(program));
}

inline Result<MethodMeta> Program::method_meta(std::string_view name) const {
  const PlanRef* ref = find_plan(name);
  if (!ref) return unknown_method(name);
  fb::Reader r(flatbuffer(), "program");
  const fb::Table plan = r.table_at(ref->table_pos, "ExecutionPlan");
  if (!r.ok()) return r.take_failure();
  return read_method_meta(plan, r);
}

inline Result<std::span<const uint8_t>> Program::segment_bytes(uint32_t index, std::string_view what) const {
  if (index >= segments_.size())
    return fail(Error::InvalidProgram, "program: ", what, " index ", index, " out of range (", segments_.size(),
                " segments)");
  const Segment& s = segments_[index];
  if (s.size == 0) return std::span<const uint8_t>();
  if (segment_base_ == 0)
    return fail(Error::InvalidProgram, "program: ", what, " ", index, " has ", s.size,
                " bytes but the file has no segment data (no extended header)");
  const uint64_t file_size = source_->size();
  if (s.offset > file_size || s.size > file_size || segment_base_ > file_size - s.offset ||
      segment_base_ + s.offset > file_size - s.size)
    return fail(Error::InvalidProgram, "program: ", what, " ", index, " [", s.offset, ", +", s.size,
                ") lies outside the file of ", file_size, " bytes (truncated file?)");
  return source_->bytes().subspan(segment_base_ + s.offset, s.size);
}

inline Result<std::span<const uint8_t>> Program::segment(uint32_t index) const {
  return segment_bytes(index, "segment");
}

inline Result<const uint8_t*> Program::constant_data(uint32_t index, size_t nbytes) const {
  if (constants_in_segment_) {
    if (index >= constant_offsets_.size())
      return fail(Error::InvalidProgram, "program: constant index ", index, " out of range (",
                  constant_offsets_.size(), " constant offsets)");
    ETRT_TRY(auto seg, segment_bytes(constant_segment_index_, "constant segment"));
    const uint64_t off = constant_offsets_[index];
    if (off > seg.size() || nbytes > seg.size() - off)
      return fail(Error::InvalidProgram, "program: constant ", index, " of ", nbytes, " bytes at offset ", off,
                  " exceeds the constant segment of ", seg.size(), " bytes");
    return seg.data() + off;
  }
  if (index >= constant_buffers_.size())
    return fail(Error::InvalidProgram, "program: constant index ", index, " out of range (",
                constant_buffers_.size(), " constant buffers)");
  const auto& b = constant_buffers_[index];
  if (nbytes > b.size())
    return fail(Error::InvalidProgram, "program: constant buffer ", index, " holds ", b.size(), " bytes, tensor needs ",
                nbytes);
  return b.data();
}

inline Result<const uint8_t*> Program::mutable_data(uint32_t index, size_t nbytes) const {
  if (!has_mutable_segment_ || index >= mutable_offsets_.size())
    return fail(Error::InvalidProgram, "program: mutable data index ", index, " out of range");
  ETRT_TRY(auto seg, segment_bytes(mutable_segment_index_, "mutable data segment"));
  const uint64_t off = mutable_offsets_[index];
  if (off > seg.size() || nbytes > seg.size() - off)
    return fail(Error::InvalidProgram, "program: mutable data ", index, " exceeds its segment");
  return seg.data() + off;
}

inline Result<std::span<const uint8_t>> Program::inline_delegate_data(uint32_t index) const {
  if (index >= inline_delegates_.size())
    return fail(Error::InvalidProgram, "program: inline delegate data index ", index, " out of range");
  return inline_delegates_[index];
}

inline Result<std::span<const uint8_t>> Program::named_data(std::string_view key) const {
  for (const auto& [k, idx] : named_data_)
    if (k == key) return segment_bytes(idx, "named data segment");
  return fail(Error::NotFound, "program: no named data '", key, "'");
}

}  // namespace etrt
