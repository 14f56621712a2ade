#include "kiln/runtime/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>

#include "kiln/ir/error.h"

namespace kiln::runtime {

namespace {

constexpr time_t kStaleSeconds = 2;

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

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The writer's pid when `name` is `<non-empty>.tmp.<pid>.<n>`, else 0.
pid_t temporary_owner(std::string_view name) {
  size_t at = name.rfind(".tmp.");
  if (at == std::string_view::npos || at == 0) return 0;
  std::string_view rest = name.substr(at + 5);
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == rest.size()) return 0;
  for (size_t i = 0; i < rest.size(); ++i)
    if (i != dot && (rest[i] < '0' || rest[i] > '9')) return 0;
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + dot, pid);
  if (ec != std::errc() || end != rest.data() + dot || pid <= 0) return 0;
  return pid;
}

// Removes the stale temporaries of killed writers in `dir` (see file_io.h), once per directory
// and process. Best effort: errors are ignored (the temporaries only waste space).
void remove_stale_temporaries(const std::string& dir) {
  // Never destroyed: files are also written by static destructors at exit (KILN_PROFILE's
  // trace), after statics made later than theirs are gone.
  static std::mutex* mutex = new std::mutex;
  static std::set<std::string>* done = new std::set<std::string>;
  {
    std::lock_guard<std::mutex> lock(*mutex);
    if (!done->insert(dir).second) return;
  }
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const pid_t self = ::getpid();
  const time_t now = ::time(nullptr);
  while (const dirent* e = ::readdir(d)) {
    pid_t owner = temporary_owner(e->d_name);
    if (owner == 0 || owner == self) continue;
    if (::kill(owner, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode) || now - st.st_mtime < kStaleSeconds) continue;
    ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

// Flushes the directory entry of a rename to disk (so the new file survives a power loss, not
// only a killed process). Best effort: some file systems do not support fsync on directories.
void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
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
  int err = ::fsync(fd) != 0 ? errno : 0;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("error flushing \"{}\": {}", path, std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    throw Error(
        fmt::format("cannot move the new file into place at \"{}\": {}", path, std::strerror(err)));
  }
  std::string dir = directory_of(path);
  sync_directory(dir);
  remove_stale_temporaries(dir);
}

}  // namespace kiln::runtime
