// Finding the XNNPACK payloads of the committed fixtures, for the XNNPACK tests.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etrt/backends/xnnpack/xnnpack_backend.h"
#include "test_support.h"

namespace etrt::test {

/// The first XNNPACK payload of a program, found by its "XH00" header in the file (the exporter stores payloads
/// as segments or inline; either way the bytes are contiguous), and the Program for its named data.
struct Fixture {
  std::shared_ptr<const Program> program;
  std::vector<uint8_t> file;
  std::span<const uint8_t> payload;
};

inline Fixture first_payload(const std::string& name, const std::string& dir = "xnnpack") {
  Fixture f;
  const auto path = fixture_dir().parent_path() / dir / (name + ".pte");
  f.program = load_program(path);
  f.file = read_file(path);
  const std::string_view bytes(reinterpret_cast<const char*>(f.file.data()), f.file.size());
  const size_t at = bytes.find("XH00");
  REQUIRE(at != std::string_view::npos);
  REQUIRE(at >= 4);
  const uint8_t* p = f.file.data() + at - 4;
  REQUIRE(at - 4 + 30 <= f.file.size());
  const uint64_t fb_end = uint64_t{fb::load_le<uint32_t>(p + 10)} + fb::load_le<uint32_t>(p + 14);
  const uint64_t cd_end = uint64_t{fb::load_le<uint32_t>(p + 18)} + fb::load_le<uint64_t>(p + 22);
  const uint64_t size = std::max(fb_end, cd_end);
  REQUIRE(at - 4 + size <= f.file.size());
  f.payload = std::span<const uint8_t>(p, size);
  return f;
}

inline xnnpack::NamedDataLookup lookup(const Program& p) {
  return [&p](std::string_view key) { return p.named_data(key); };
}

/// A fixture's first payload parsed and made into an executor. `graph` is the parsed graph as the file wrote it
/// (the executor takes its own copy and may rewrite it); the fixture is kept because the executor reads the
/// program's named data in place.
struct Created {
  Fixture fixture;
  xnnpack::Graph graph;
  std::unique_ptr<xnnpack::Executor> executor;
};

inline Created create_executor(const std::string& name, const std::string& dir = "xnnpack") {
  Created c;
  c.fixture = first_payload(name, dir);
  auto g = xnnpack::parse_payload(c.fixture.payload, lookup(*c.fixture.program));
  INFO(name << ": " << (g ? std::string() : g.error().what));
  REQUIRE(g.has_value());
  c.graph = *g;
  auto e = xnnpack::Executor::create(std::move(*g));
  INFO(name << ": " << (e ? std::string() : e.error().what));
  REQUIRE(e.has_value());
  c.executor = std::move(*e);
  return c;
}

}  // namespace etrt::test
