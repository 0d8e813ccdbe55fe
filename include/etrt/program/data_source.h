// DataSource: the bytes of a program or data file, owned (aligned heap copy), memory-mapped, or borrowed from an
// owner that the source keeps alive (e.g. a Python bytes object).
//
// Note [mapped files]: a mapped file is read in place (constants are never copied), which is what large models
// need. The hazard: if another process truncates the file while it is mapped, touching a page past the new
// end raises SIGBUS, and a file overwritten in place changes the bytes under a live program. A mapped source keeps
// its file open and check_unchanged() compares the file's size, inode and modification time with what was mapped;
// the Python bindings call it before every load_method, method_meta and execution, so a changed file is an error
// instead of a crash or a silently different model. (A truncation racing with a running execution cannot be caught
// that way.) read_file() copies the whole file into memory instead, for files that may change while loaded. The
// check is a system call (about 1.5 us on a virtual machine, as much as a small model's whole call), so the Python
// loaders, unless told otherwise, read files up to 16 MiB into memory and map only larger ones.
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
#include <utility>

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
    if (fd_ >= 0) ::close(fd_);
    if (owned_) ::operator delete(const_cast<uint8_t*>(bytes_.data()), std::align_val_t{64});
  }

  std::span<const uint8_t> bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }
  /// True when the bytes sit in read-only memory (a mapped file); constants read from it must not be written.
  bool read_only() const { return mapped_ || read_only_parent_; }

  /// Maps a file read-only and keeps it open for check_unchanged (Note [mapped files]). Errors name the path and
  /// the system's reason.
  static Result<std::shared_ptr<const DataSource>> from_file(const std::string& path) {
    ETRT_TRY(OpenFile f, OpenFile::open(path));
    auto src = std::shared_ptr<DataSource>(new DataSource());
    if (f.st.st_size == 0) return std::shared_ptr<const DataSource>(std::move(src));
    void* p = ::mmap(nullptr, static_cast<size_t>(f.st.st_size), PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (p == MAP_FAILED) return fail(Error::AccessFailed, "cannot map '", path, "': ", std::strerror(errno));
    src->bytes_ = {static_cast<const uint8_t*>(p), static_cast<size_t>(f.st.st_size)};
    src->mapped_ = true;
    src->map_len_ = static_cast<size_t>(f.st.st_size);
    src->path_ = path;
    src->stat_ = f.st;
    src->fd_ = std::exchange(f.fd, -1);
    return std::shared_ptr<const DataSource>(std::move(src));
  }

  /// Reads a whole file into memory the source owns (Note [mapped files]): later changes to the file do not reach it.
  static Result<std::shared_ptr<const DataSource>> read_file(const std::string& path) {
    ETRT_TRY(OpenFile f, OpenFile::open(path));
    const auto size = static_cast<size_t>(f.st.st_size);
    auto src = std::shared_ptr<DataSource>(new DataSource());
    if (size == 0) return std::shared_ptr<const DataSource>(std::move(src));
    auto* p = static_cast<uint8_t*>(::operator new(size, std::align_val_t{64}, std::nothrow));
    if (!p) return fail(Error::MemoryAllocationFailed, "cannot read '", path, "': ", size, " bytes do not fit in memory");
    src->bytes_ = {p, size};
    src->owned_ = true;
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::pread(f.fd, p + done, size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(Error::AccessFailed, "cannot read '", path, "': ", std::strerror(errno));
      if (n == 0) return fail(Error::AccessFailed, "cannot read '", path, "': the file shrank while it was read");
      done += static_cast<size_t>(n);
    }
    return std::shared_ptr<const DataSource>(std::move(src));
  }

  /// For a mapped file (or a slice of one): fails when the file's size, inode or modification time differ from when
  /// it was mapped (Note [mapped files]). Sources in memory always pass.
  Status check_unchanged() const {
    if (parent_) return parent_->check_unchanged();
    if (fd_ < 0) return {};
    struct stat now {};
    if (::fstat(fd_, &now) != 0) return fail(Error::AccessFailed, "cannot stat '", path_, "': ", std::strerror(errno));
    if (now.st_size != stat_.st_size)
      return fail(Error::AccessFailed, "'", path_, "' changed size on disk since it was loaded (", stat_.st_size,
                  " bytes, now ", now.st_size, "); the program reads it in place, so reload it (or load with "
                  "mmap=False to read the file into memory)");
    if (now.st_ino != stat_.st_ino || now.st_mtim.tv_sec != stat_.st_mtim.tv_sec ||
        now.st_mtim.tv_nsec != stat_.st_mtim.tv_nsec)
      return fail(Error::AccessFailed, "'", path_, "' was modified on disk since it was loaded; the program reads it "
                  "in place, so reload it (or load with mmap=False to read the file into memory)");
    return {};
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
    src->parent_ = parent;
    src->owner_ = std::move(parent);
    return src;
  }

 private:
  /// An open file descriptor with its stat; closes the descriptor unless it was taken.
  struct OpenFile {
    int fd = -1;
    struct stat st {};
    OpenFile() = default;
    OpenFile(OpenFile&& o) noexcept : fd(std::exchange(o.fd, -1)), st(o.st) {}
    OpenFile& operator=(OpenFile&&) = delete;
    ~OpenFile() {
      if (fd >= 0) ::close(fd);
    }
    static Result<OpenFile> open(const std::string& path) {
      OpenFile f;
      f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (f.fd < 0) return fail(Error::AccessFailed, "cannot open '", path, "': ", std::strerror(errno));
      if (::fstat(f.fd, &f.st) != 0) return fail(Error::AccessFailed, "cannot stat '", path, "': ", std::strerror(errno));
      if (S_ISDIR(f.st.st_mode)) return fail(Error::AccessFailed, "cannot open '", path, "': it is a directory");
      return f;
    }
  };

  DataSource() = default;
  std::span<const uint8_t> bytes_;
  bool mapped_ = false;
  bool owned_ = false;
  bool read_only_parent_ = false;
  size_t map_len_ = 0;
  int fd_ = -1;                                 // a mapped file, kept open for check_unchanged
  struct stat stat_ {};                         // the mapped file as it was mapped
  std::string path_;
  std::shared_ptr<const DataSource> parent_;    // the source a slice was cut from
  std::shared_ptr<const void> owner_;
};

}  // namespace etrt
