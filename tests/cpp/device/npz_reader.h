// Reads the float32 arrays of an uncompressed .npz (numpy.savez) for the device tests: zip entries stored without
// compression, each a .npy file. Anything else fails the test with a message.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace etrt::test {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

inline NpyArray parse_npy(const uint8_t* p, size_t n) {
  REQUIRE(n >= 10);
  REQUIRE(std::memcmp(p, "\x93NUMPY", 6) == 0);
  const int major = p[6];
  const size_t hlen = major == 1 ? (p[8] | (p[9] << 8)) : (p[8] | (p[9] << 8) | (p[10] << 16) | (size_t(p[11]) << 24));
  const size_t hstart = major == 1 ? 10 : 12;
  REQUIRE(hstart + hlen <= n);
  const std::string header(reinterpret_cast<const char*>(p + hstart), hlen);
  INFO(header);
  REQUIRE(header.find("'descr': '<f4'") != std::string::npos);
  REQUIRE(header.find("'fortran_order': False") != std::string::npos);
  NpyArray a;
  const size_t open = header.find("'shape': (");
  REQUIRE(open != std::string::npos);
  size_t i = open + 10;
  while (header[i] != ')') {
    if (header[i] >= '0' && header[i] <= '9') {
      int64_t v = 0;
      while (header[i] >= '0' && header[i] <= '9') v = v * 10 + (header[i++] - '0');
      a.shape.push_back(v);
    } else {
      ++i;
    }
  }
  int64_t numel = 1;
  for (int64_t s : a.shape) numel *= s;
  REQUIRE(hstart + hlen + size_t(numel) * 4 <= n);
  a.data.resize(size_t(numel));
  std::memcpy(a.data.data(), p + hstart + hlen, size_t(numel) * 4);
  return a;
}

/// name (without ".npy") -> array.
inline std::map<std::string, NpyArray> read_npz(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> z{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  std::map<std::string, NpyArray> out;
  size_t pos = 0;
  const auto u16 = [&](size_t at) { return uint32_t(z[at]) | (uint32_t(z[at + 1]) << 8); };
  const auto u32 = [&](size_t at) { return u16(at) | (u16(at + 2) << 16); };
  while (pos + 30 <= z.size() && u32(pos) == 0x04034b50) {  // local file header
    const uint32_t method = u16(pos + 8), size = u32(pos + 18), name_len = u16(pos + 26), extra = u16(pos + 28);
    std::string name(reinterpret_cast<const char*>(&z[pos + 30]), name_len);
    INFO(path.string() << ": " << name);
    REQUIRE(method == 0);  // stored
    const size_t data = pos + 30 + name_len + extra;
    uint32_t real_size = size;
    if (size == 0xFFFFFFFFu) {  // zip64: the size is in the extra field
      REQUIRE(extra >= 20);
      real_size = u32(pos + 30 + name_len + 4);
    }
    REQUIRE(data + real_size <= z.size());
    if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") name.resize(name.size() - 4);
    out[name] = parse_npy(&z[data], real_size);
    pos = data + real_size;
  }
  REQUIRE(!out.empty());
  return out;
}

}  // namespace etrt::test
