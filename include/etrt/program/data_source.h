// DataSource: the bytes of a program or data file, owned (aligned heap copy), memory-mapped, or borrowed from an
// owner that the source keeps alive (e.g. a Python bytes object).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>

#include "etrt/core/result.h"

namespace etrt {

/// Alignment every program region needs so that constants can be read in place (alignof(max_align_t)).
inline constexpr size_t kProgramAlignment = 16;

class DataSource {
 public:
  DataSource(const DataSource&) = delete;
  DataSource& operator=(const DataSource&) = delete;
  ~DataSource() {
    if (mapped_) munmap(const_cast<uint8_t*>(bytes_.data()), map_len_);
    if (owned_) ::operator delete(const_cast<uint8_t*>(bytes_.data()), std::align_val_t{64});
  }

  std::span<const uint8_t> bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }
  /// True when the bytes sit in read-only memory (a mapped file); constants read from it must not be written.
  bool read_only() const { return mapped_ || read_only_parent_; }

  /// Maps a file read-only. Errors name the path and the system's reason.
  static Result<std::shared_ptr<const DataSource>> from_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(Error::AccessFailed, "cannot open '", path, "': ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      return fail(Error::AccessFailed, "cannot stat '", path, "': ", std::strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return fail(Error::AccessFailed, "cannot open '", path, "': it is a directory");
    }
    auto src = std::shared_ptr<DataSource>(new DataSource());
    if (st.st_size == 0) {
      ::close(fd);
      return std::shared_ptr<const DataSource>(std::move(src));
    }
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) return fail(Error::AccessFailed, "cannot map '", path, "': ", std::strerror(e));
    src->bytes_ = {static_cast<const uint8_t*>(p), static_cast<size_t>(st.st_size)};
    src->mapped_ = true;
    src->map_len_ = static_cast<size_t>(st.st_size);
    return std::shared_ptr<const DataSource>(std::move(src));
  }

  /// Copies `bytes` into a 64-byte-aligned buffer the source owns.
  static std::shared_ptr<const DataSource> copy_of(std::span<const uint8_t> bytes) {
    auto src = std::shared_ptr<DataSource>(new DataSource());
    if (!bytes.empty()) {
      auto* p = static_cast<uint8_t*>(::operator new(bytes.size(), std::align_val_t{64}));
      std::memcpy(p, bytes.data(), bytes.size());
      src->bytes_ = {p, bytes.size()};
      src->owned_ = true;
    }
    return src;
  }

  /// Borrows `bytes` and keeps `owner` alive as long as the source; copies when the bytes are misaligned.
  static std::shared_ptr<const DataSource> borrow(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner) {
    if (reinterpret_cast<uintptr_t>(bytes.data()) % kProgramAlignment != 0) return copy_of(bytes);
    auto src = std::shared_ptr<DataSource>(new DataSource());
    src->bytes_ = bytes;
    src->owner_ = std::move(owner);
    return src;
  }

  /// A sub-range of another source (an embedded program), sharing its lifetime; copies when misaligned.
  static std::shared_ptr<const DataSource> slice(std::shared_ptr<const DataSource> parent, size_t offset,
                                                 size_t size) {
    auto sub = parent->bytes_.subspan(offset, size);
    if (reinterpret_cast<uintptr_t>(sub.data()) % kProgramAlignment != 0) return copy_of(sub);
    auto src = std::shared_ptr<DataSource>(new DataSource());
    src->bytes_ = sub;
    src->mapped_ = false;
    src->read_only_parent_ = parent->read_only();
    src->owner_ = std::move(parent);
    return src;
  }

 private:
  DataSource() = default;
  std::span<const uint8_t> bytes_;
  bool mapped_ = false;
  bool owned_ = false;
  bool read_only_parent_ = false;
  size_t map_len_ = 0;
  std::shared_ptr<const void> owner_;
};

}  // namespace etrt
