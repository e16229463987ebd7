#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace densa {

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(path.string() + ": not a regular file");
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return internal_error(path.string() + ": mmap failed: " + std::strerror(err));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

std::unique_ptr<MappedFile> MappedFile::from_bytes(std::vector<uint8_t> bytes, std::filesystem::path path) {
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = std::move(path);
  f->owned_ = std::move(bytes);
  f->size_ = f->owned_.size();
  f->data_ = f->owned_.empty() ? nullptr : f->owned_.data();
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && owned_.empty()) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace densa
