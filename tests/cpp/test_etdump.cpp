// ETDump writer/reader: the corpus file etdump.etdp (MANIFEST.md), round trips through write_etdump, and corrupt
// input (truncations, byte flips) that must give an error or a value, never a crash.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "etrt/devtools/etdump.h"
#include "etrt/format/flatbuffer_builder.h"

namespace {

using namespace etrt::etdump;

std::filesystem::path etdump_corpus_path() {
  const char* v = std::getenv("ETRT_CORPUS_DIR");
  return std::filesystem::path(v ? v : ETRT_DEFAULT_CORPUS_DIR) / "etdump.etdp";
}

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// The corpus file, or empty (with a WARN) when the corpus is absent.
std::vector<uint8_t> corpus_etdump() {
  const auto p = etdump_corpus_path();
  if (!std::filesystem::exists(p)) {
    WARN("etdump.etdp not found at " << p << "; skipping (set ETRT_CORPUS_DIR)");
    return {};
  }
  return read_bytes(p);
}

ETDumpData decode(std::span<const uint8_t> bytes) {
  auto r = read_etdump(bytes);
  INFO((r ? std::string() : r.error().describe()));
  REQUIRE(r.has_value());
  return std::move(*r);
}

uint32_t u32_at(const std::vector<uint8_t>& b, size_t pos) { return etrt::fb::load_le<uint32_t>(b.data() + pos); }

/// The values MANIFEST.md lists for etdump.etdp.
void check_manifest_facts(const ETDumpData& d) {
  CHECK(d.version == 0);
  REQUIRE(d.runs.size() == 2);

  const RunData& def = d.runs[0];
  CHECK(def.name == "Default");
  CHECK(def.bundled_input_index == -1);
  REQUIRE(def.profile_events.size() == 2);
  CHECK(def.profile_events[0] == make_event("Method::init", -1, 0, 399054, 421538));
  CHECK(def.profile_events[1] == make_event("Program::load_method", -1, 0, 398073, 422930));

  const RunData& ex = d.runs[1];
  CHECK(ex.name == "Execute");
  CHECK(ex.bundled_input_index == -1);
  REQUIRE(ex.profile_events.size() == 29);
  CHECK(ex.profile_events.front() == make_event("native_call_convolution.out", 0, 0, 426786, 971569));
  CHECK(ex.profile_events.back() == make_event("Method::execute", -1, 0, 425313, 2324134));

  const char* ops[14] = {"convolution", "relu",         "max_pool2d_with_indices", "convolution", "relu",
                         "max_pool2d_with_indices",     "permute_copy", "addmm", "relu", "permute_copy",
                         "addmm",       "relu",         "permute_copy", "addmm"};
  for (int i = 0; i < 14; ++i) {
    const ProfileEvent& native = ex.profile_events[2 * static_cast<size_t>(i)];
    const ProfileEvent& call = ex.profile_events[2 * static_cast<size_t>(i) + 1];
    INFO("instruction " << i);
    CHECK(native.name == std::string("native_call_") + ops[i] + ".out");
    CHECK(native.chain_index == 0);
    CHECK(native.instruction_id == i);
    CHECK(call.name == "OPERATOR_CALL");
    CHECK(call.chain_index == 0);
    CHECK(call.instruction_id == i);
    // The enclosing OPERATOR_CALL scope encloses its native call.
    CHECK(call.start_time <= native.start_time);
    CHECK(native.end_time <= call.end_time);
  }
  for (const RunData& run : d.runs)
    for (const ProfileEvent& e : run.profile_events) {
      CHECK(e.delegate_debug_id_int == -1);
      CHECK(e.delegate_debug_id_str.empty());
      CHECK(e.delegate_debug_metadata.empty());
      CHECK(e.start_time <= e.end_time);
    }
}

/// Checks the container and the alignment of every u64 timestamp field in a buffer we wrote, by walking it with the
/// reader primitives.
void check_container(const std::vector<uint8_t>& b) {
  REQUIRE(b.size() >= 12);
  CHECK(u32_at(b, 0) == b.size() - 4);
  CHECK(std::string(reinterpret_cast<const char*>(b.data()) + 8, 4) == "ED00");
  CHECK(b.size() % 8 == 0);
  etrt::fb::Reader r(b, "etdump");
  const auto root = r.root(4);
  CHECK(root.pos() % 4 == 0);
  const auto runs = root.tables(1, "run_data");
  for (uint32_t i = 0; i < runs.size(); ++i) {
    const auto events = runs.at(i).tables(3, "events");
    for (uint32_t j = 0; j < events.size(); ++j) {
      const auto pe = events.at(j).table(0, "profile_event");
      for (int slot : {6, 7})
        if (pe.field_offset(slot)) CHECK((pe.pos() + pe.field_offset(slot)) % 8 == 0);
      for (int slot : {1, 2, 3})
        if (pe.field_offset(slot)) CHECK((pe.pos() + pe.field_offset(slot)) % 4 == 0);
    }
  }
  CHECK(r.ok());
}

/// Parses and, when it succeeds, touches every value (so sanitizers see any bad read).
size_t parse_any(std::span<const uint8_t> bytes) {
  auto r = read_etdump(bytes);
  if (!r) {
    CHECK(!r.error().what.empty());
    return 0;
  }
  size_t n = 0;
  for (const auto& run : r->runs)
    for (const auto& e : run.profile_events) n += e.name.size() + e.delegate_debug_metadata.size() + 1;
  return n;
}

}  // namespace

TEST_CASE("etdump: corpus etdump.etdp matches MANIFEST.md", "[etdump]") {
  const auto bytes = corpus_etdump();
  if (bytes.empty()) return;
  REQUIRE(bytes.size() == 2320);
  CHECK(u32_at(bytes, 0) == 2316);
  CHECK(u32_at(bytes, 4) == 8);
  check_manifest_facts(decode(bytes));
}

TEST_CASE("etdump: corpus re-serialised with write_etdump decodes to the same values", "[etdump]") {
  const auto bytes = corpus_etdump();
  if (bytes.empty()) return;
  const ETDumpData original = decode(bytes);
  const auto written = write_etdump(original);
  check_container(written);
  const ETDumpData again = decode(written);
  CHECK(again == original);
  check_manifest_facts(again);
  // Writing is deterministic and idempotent.
  CHECK(write_etdump(again) == written);
}

TEST_CASE("etdump: synthetic round trip with default and non-default values", "[etdump]") {
  ETDumpData d;
  d.version = 7;
  RunData a;
  a.name = "Default";  // bundled_input_index -1 (schema default, omitted)
  a.profile_events.push_back(make_event("Method::init", -1, 0, 1, 2));            // the runtime's unset values
  a.profile_events.push_back(make_event("chain0", 0, -1, 0, 0));                   // all schema defaults: omitted
  a.profile_events.push_back(make_event("big", 3, 12345, 0xFFFFFFFFFFFFFFF0ull, ~0ull));
  a.profile_events.push_back(make_event("neg", -7, -2, 5, 4));
  ProfileEvent del;  // a delegate event identified by int id, no name
  del.delegate_debug_id_int = 42;
  del.chain_index = 1;
  del.instruction_id = 9;
  del.start_time = 100;
  del.end_time = 200;
  a.profile_events.push_back(del);
  ProfileEvent del2 = make_event("delegate", 2, 3, 10, 11);
  del2.delegate_debug_id_int = 0;
  del2.delegate_debug_id_str = "backend/op#1";
  del2.delegate_debug_metadata = {0, 1, 2, 0xff, 7};
  a.profile_events.push_back(del2);
  d.runs.push_back(a);
  RunData b;
  b.name = "Execute";
  b.bundled_input_index = 0;  // non-default
  d.runs.push_back(b);        // no events
  RunData c;
  c.name = "";  // empty name
  c.bundled_input_index = 5;
  c.profile_events.push_back(ProfileEvent{});  // default-constructed: chain -1, instruction 0 are written
  d.runs.push_back(c);

  const auto bytes = write_etdump(d);
  check_container(bytes);
  const ETDumpData back = decode(bytes);
  CHECK(back == d);
  REQUIRE(back.runs.size() == 3);
  CHECK(back.runs[0].profile_events[1].chain_index == 0);
  CHECK(back.runs[0].profile_events[1].instruction_id == -1);
  CHECK(back.runs[0].profile_events[4].name.empty());
  CHECK(back.runs[1].bundled_input_index == 0);
  CHECK(back.runs[2].profile_events[0].chain_index == -1);
  CHECK(back.runs[2].profile_events[0].instruction_id == 0);

  // Schema defaults really are omitted: the all-default event has a 4-byte vtable entry list of name only.
  etrt::fb::Reader r(bytes, "etdump");
  const auto pe = r.root(4).tables(1, "run_data").at(0).tables(3, "events").at(1).table(0, "profile_event");
  REQUIRE(r.ok());
  CHECK(pe.field_offset(0) != 0);
  for (int slot = 1; slot < 8; ++slot) CHECK(pe.field_offset(slot) == 0);
  CHECK(pe.num_slots() == 1);  // trailing absent slots trimmed
  const auto root = r.root(4);
  CHECK(root.scalar<uint32_t>(0, 0, "version") == 7);
}

TEST_CASE("etdump: empty ETDump", "[etdump]") {
  const auto bytes = write_etdump(ETDumpData{});
  check_container(bytes);
  const ETDumpData back = decode(bytes);
  CHECK(back.version == 0);
  CHECK(back.runs.empty());
  CHECK(back == ETDumpData{});
}

TEST_CASE("etdump: reader tolerates allocation/debug events and allocators", "[etdump]") {
  // Hand-built with the general builder: one run with [alloc event, profile event, debug event] and an allocator.
  etrt::fb::Builder b;
  const auto alloc_name = b.create_string("planned");
  b.start_table();
  b.add_offset(0, alloc_name);
  const auto allocator = b.end_table();
  const auto allocators = b.create_offset_vector(std::vector<etrt::fb::Builder::Offset>{allocator});

  b.start_table();  // AllocationEvent{allocator_id 1, allocation_size 64}
  b.add_scalar<uint64_t>(1, 64, 0);
  b.add_scalar<int32_t>(0, 1, 0);
  const auto alloc_ev = b.end_table();
  b.start_table();
  b.add_offset(1, alloc_ev);
  const auto ev0 = b.end_table();

  const auto pname = b.create_string("OPERATOR_CALL");
  b.start_table();
  b.add_scalar<uint64_t>(6, 10, 0);
  b.add_scalar<uint64_t>(7, 20, 0);
  b.add_offset(0, pname);
  b.add_scalar<int32_t>(2, 3, -1);
  const auto pe = b.end_table();
  b.start_table();
  b.add_offset(0, pe);
  const auto ev1 = b.end_table();

  const std::vector<int64_t> sizes{2, 3};
  const auto sizes_vec = b.create_vector(sizes);
  b.start_table();  // Tensor
  b.add_scalar<int8_t>(0, 6, 0);
  b.add_offset(1, sizes_vec);
  const auto tensor = b.end_table();
  b.start_table();  // Value{val: Tensor}
  b.add_scalar<int8_t>(0, 5, 0);
  b.add_offset(1, tensor);
  const auto value = b.end_table();
  const auto dname = b.create_string("aten::add");
  b.start_table();  // DebugEvent
  b.add_scalar<uint64_t>(0, 2, 0);
  b.add_offset(2, value);
  b.add_offset(5, dname);
  const auto dbg = b.end_table();
  b.start_table();
  b.add_offset(2, dbg);
  const auto ev2 = b.end_table();

  const auto events = b.create_offset_vector(std::vector<etrt::fb::Builder::Offset>{ev0, ev1, ev2});
  const auto rname = b.create_string("Execute");
  b.start_table();
  b.add_offset(0, rname);
  b.add_offset(2, allocators);
  b.add_offset(3, events);
  const auto run = b.end_table();
  const auto runs = b.create_offset_vector(std::vector<etrt::fb::Builder::Offset>{run});
  b.start_table();
  b.add_offset(1, runs);
  const auto root = b.end_table();
  const auto bytes = b.finish(root, "ED00", true);

  check_container(bytes);
  const ETDumpData d = decode(bytes);
  REQUIRE(d.runs.size() == 1);
  CHECK(d.runs[0].name == "Execute");
  REQUIRE(d.runs[0].profile_events.size() == 1);
  CHECK(d.runs[0].profile_events[0] == make_event("OPERATOR_CALL", 0, 3, 10, 20));

  // The int64 sizes vector data is 8-aligned relative to byte 0.
  etrt::fb::Reader r(bytes, "etdump");
  const auto dbg_t = r.root(4).tables(1, "r").at(0).tables(3, "e").at(2).table(2, "d");
  const auto sz = dbg_t.table(2, "v").table(1, "t").vector<int64_t>(1, "sizes");
  REQUIRE(r.ok());
  REQUIRE(sz.size() == 2);
  CHECK((sz.bytes() - bytes.data()) % 8 == 0);
  CHECK(sz[0] == 2);
  CHECK(sz[1] == 3);
}

TEST_CASE("etdump: builder without size prefix, vtable sharing and force_align", "[etdump]") {
  etrt::fb::Builder b;
  const std::vector<uint8_t> blob{1, 2, 3};
  const auto v = b.create_vector(blob, 16);
  b.start_table();
  b.add_scalar<int32_t>(0, 5, 0);
  const auto t1 = b.end_table();
  b.start_table();
  b.add_scalar<int32_t>(0, 6, 0);
  const auto t2 = b.end_table();
  b.start_table();
  b.add_offset(0, t1);
  b.add_offset(1, t2);
  b.add_offset(2, v);
  b.add_scalar<double>(3, 1.5, 0.0);
  b.add_scalar<int8_t>(4, -1, -1);  // non-zero default: omitted
  const auto root = b.finish(b.end_table(), "TS01");
  etrt::fb::Reader r(root, "test");
  CHECK(r.identifier() == "TS01");
  const auto t = r.root();
  const auto a = t.table(0, "a");
  const auto c = t.table(1, "c");
  CHECK(a.scalar<int32_t>(0, 0, "x") == 5);
  CHECK(c.scalar<int32_t>(0, 0, "x") == 6);
  // t1 and t2 share one vtable.
  CHECK(static_cast<int64_t>(a.pos()) - etrt::fb::load_le<int32_t>(root.data() + a.pos()) ==
        static_cast<int64_t>(c.pos()) - etrt::fb::load_le<int32_t>(root.data() + c.pos()));
  const auto vec = t.vector<uint8_t>(2, "v");
  REQUIRE(vec.size() == 3);
  CHECK((vec.bytes() - root.data()) % 16 == 0);
  CHECK(vec[2] == 3);
  CHECK(t.scalar<double>(3, 0.0, "d") == 1.5);
  CHECK((t.pos() + t.field_offset(3)) % 8 == 0);
  CHECK(t.field_offset(4) == 0);
  CHECK(t.scalar<int8_t>(4, -1, "e") == -1);
  CHECK(root.size() % 16 == 0);
  CHECK(r.ok());
}

TEST_CASE("etdump: rejects bad containers", "[etdump]") {
  auto good = write_etdump(ETDumpData{1, {RunData{"Execute", -1, {make_event("x", 0, 1, 2, 3)}}}});
  REQUIRE(read_etdump(good).has_value());
  {
    auto bad = good;
    bad[8] = 'X';
    CHECK_FALSE(read_etdump(bad).has_value());
  }
  {
    auto bad = good;
    bad.push_back(0);  // size prefix no longer matches
    CHECK_FALSE(read_etdump(bad).has_value());
  }
  {
    auto bad = good;
    bad[4] = 0xF0;  // root outside the buffer
    CHECK_FALSE(read_etdump(bad).has_value());
  }
  CHECK_FALSE(read_etdump({}).has_value());
}

TEST_CASE("etdump: every truncation of etdump.etdp is an error or a value", "[etdump][robustness]") {
  auto bytes = corpus_etdump();
  if (bytes.empty()) bytes = write_etdump(ETDumpData{0, {RunData{"Execute", -1, {make_event("x", 0, 1, 2, 3)}}}});
  size_t ok = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK_FALSE(read_etdump(cut).has_value());  // the size prefix no longer matches
    // With the size prefix patched, the reader has to find the damage inside the flatbuffer.
    if (n >= 4) {
      const uint32_t patched = static_cast<uint32_t>(n - 4);
      std::memcpy(cut.data(), &patched, 4);
      if (parse_any(cut) > 0) ++ok;
    }
  }
  INFO("truncations that still decoded: " << ok);
  SUCCEED();
}

TEST_CASE("etdump: byte-flip sweep over etdump.etdp is an error or a value", "[etdump][robustness]") {
  auto bytes = corpus_etdump();
  if (bytes.empty()) bytes = write_etdump(ETDumpData{0, {RunData{"Execute", -1, {make_event("x", 0, 1, 2, 3)}}}});
  size_t errors = 0, values = 0;
  for (const uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}, uint8_t{0x10}}) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      auto flipped = bytes;
      flipped[i] ^= mask;
      auto r = read_etdump(flipped);
      if (r) {
        ++values;
        // A decoded value re-serialises and decodes to itself.
        auto again = read_etdump(write_etdump(*r));
        REQUIRE(again.has_value());
        CHECK(*again == *r);
      } else {
        ++errors;
      }
    }
  }
  INFO("errors " << errors << ", values " << values);
  CHECK(errors > 0);
  CHECK(values > 0);
}

TEST_CASE("etdump: crafted sharing is bounded", "[etdump][robustness]") {
  // One event whose long name is shared by many events; many runs share one events vector. Legal flatbuffers,
  // but decoding would amplify the input quadratically without the budget.
  etrt::fb::Builder b;
  const auto name = b.create_string(std::string(4000, 'n'));
  b.start_table();
  b.add_offset(0, name);
  const auto pe = b.end_table();
  b.start_table();
  b.add_offset(0, pe);
  const auto ev = b.end_table();
  const auto events = b.create_offset_vector(std::vector<etrt::fb::Builder::Offset>(2000, ev));
  b.start_table();
  b.add_offset(3, events);
  const auto run = b.end_table();
  const auto runs = b.create_offset_vector(std::vector<etrt::fb::Builder::Offset>(2000, run));
  b.start_table();
  b.add_offset(1, runs);
  const auto bytes = b.finish(b.end_table(), "ED00", true);
  auto r = read_etdump(bytes);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().what.find("exceeds") != std::string::npos);
}
