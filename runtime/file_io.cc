#include "runtime/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "ir/error.h"

namespace kiln::runtime {

namespace {

// Creates a temporary beside `path` that no other writer uses: the name has the process id and
// a per-process sequence number (threads and processes writing the same path each get their
// own), and O_EXCL skips a name left behind by a crashed process whose pid was reused.
// Returns the descriptor (or -1 with errno set) and the name in `tmp`.
int create_unique_temporary(const std::string& path, std::string& tmp) {
  static std::atomic<uint64_t> sequence{0};
  for (int attempt = 0;; ++attempt) {
    tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), sequence.fetch_add(1));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST || attempt == 100) return fd;
  }
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  std::string tmp;
  int fd = create_unique_temporary(path, tmp);
  if (fd < 0)
    throw Error(
        fmt::format("cannot write \"{}\": {} (does the directory exist and is it "
                    "writable?)",
                    path, std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("error writing \"{}\": {}", path, std::strerror(err)));
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("error flushing \"{}\": {}", path, std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(
        fmt::format("cannot move the new file into place at \"{}\": {}", path, std::strerror(err)));
  }
}

}  // namespace kiln::runtime
