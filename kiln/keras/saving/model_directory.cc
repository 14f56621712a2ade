#include "kiln/keras/saving/model_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kiln/keras/io/file_util.h"

namespace kiln::saving_detail {
namespace {

namespace fs = std::filesystem;

constexpr time_t kStaleSeconds = 2;

void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Removes "<base>.tmp.<pid>.<n>" directories beside `path` whose writer is gone (best effort).
void remove_stale_temporaries(const fs::path& path) {
  const std::string prefix = path.filename().string() + ".tmp.";
  std::error_code ec;
  fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  for (const fs::directory_entry& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    std::string rest = name.substr(prefix.size());
    size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0) continue;
    pid_t pid = 0;
    try {
      pid = pid_t(std::stol(rest.substr(0, dot)));
    } catch (const std::exception&) {
      continue;
    }
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        ::time(nullptr) - st.st_mtime < kStaleSeconds)
      continue;
    fs::remove_all(e.path(), ec);
  }
}

std::string without_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

bool is_saved_model(const std::string& dir) {
  std::error_code ec;
  fs::path meta = fs::path(dir) / kMetadataFile;
  if (!fs::is_regular_file(meta, ec)) return false;
  try {
    Json j = Json::parse(io::read_file(meta.string()));
    return j.is_object() && j.value("format", "") == kFormat;
  } catch (const std::exception&) {
    return false;
  }
}

Json read_json_file(const std::string& file) {
  std::string text = io::read_file(file);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw Error(
        fmt::format("\"{}\" is not valid JSON ({}); the saved model is damaged: save it "
                    "again",
                    file, e.what()));
  }
}

DirectoryWriter::DirectoryWriter(std::string path, bool overwrite)
    : path_(without_trailing_slashes(std::move(path))) {
  if (path_.empty()) throw Error("save_model: the path is empty");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path_, ec))) {
    if (!fs::is_directory(path_, ec) || !is_saved_model(path_))
      throw Error(fmt::format(
          "save_model: \"{}\" exists and is not a saved kiln model (no {} of format \"{}\"); "
          "kiln does not replace it: choose another path or remove it",
          path_, kMetadataFile, kFormat));
    if (!overwrite)
      throw Error(fmt::format(
          "save_model: \"{}\" already holds a saved model and overwrite is off; choose another "
          "path or save with overwrite = true",
          path_));
  }
  remove_stale_temporaries(path_);
  static std::atomic<uint64_t> sequence{0};
  for (int attempt = 0;; ++attempt) {
    tmp_ = fmt::format("{}.tmp.{}.{}", path_, ::getpid(), sequence.fetch_add(1));
    if (::mkdir(tmp_.c_str(), 0755) == 0) break;
    if (errno != EEXIST || attempt == 100)
      throw Error(fmt::format(
          "save_model: cannot create the directory \"{}\": {} (does the parent directory exist "
          "and is it writable?)",
          tmp_, std::strerror(errno)));
  }
}

DirectoryWriter::~DirectoryWriter() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

std::string DirectoryWriter::file(const std::string& name) const { return tmp_ + "/" + name; }

void DirectoryWriter::commit() {
  sync_directory(tmp_);
  std::error_code ec;
  const bool replace = fs::exists(fs::symlink_status(path_, ec));
  if (!replace) {
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw Error(fmt::format("save_model: cannot move \"{}\" to \"{}\": {}", tmp_, path_,
                              std::strerror(errno)));
  } else if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS)
      throw Error(fmt::format("save_model: cannot replace \"{}\" with \"{}\": {}", path_, tmp_,
                              std::strerror(errno)));
    // No atomic exchange here: move the old model aside, then the new one in.
    const std::string old = tmp_ + ".old";
    if (std::rename(path_.c_str(), old.c_str()) != 0 ||
        std::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw Error(
          fmt::format("save_model: cannot replace \"{}\": {}", path_, std::strerror(errno)));
    fs::remove_all(old, ec);
  }
  committed_ = true;
  // After an exchange the temporary's name holds the old model.
  fs::remove_all(tmp_, ec);
  fs::path parent = fs::path(path_).parent_path();
  sync_directory(parent.empty() ? "." : parent.string());
}

}  // namespace kiln::saving_detail
