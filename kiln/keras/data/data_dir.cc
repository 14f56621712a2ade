#include "kiln/keras/data/data_dir.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

#include "kiln/runtime/knobs.h"

namespace kiln::data {
namespace {

// `<prefix>/share/kiln/data` next to the file this function's code was loaded from (the
// shared library, or the executable a static kiln is linked into); empty if there is none.
std::string installed_data_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&installed_data_dir), &info) == 0 ||
      info.dli_fname == nullptr)
    return {};
  std::error_code ec;
  std::filesystem::path binary = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return {};
  std::filesystem::path dir = binary.parent_path().parent_path() / KILN_INSTALL_DATA_SUBDIR;
  return std::filesystem::is_directory(dir, ec) ? dir.string() : std::string();
}

}  // namespace

std::string data_dir() {
  if (std::optional<std::string> env = runtime::knobs::data_dir()) return *env;
  static const std::string installed = installed_data_dir();
  if (!installed.empty()) return installed;
  return KILN_SOURCE_DATA_DIR;
}

}  // namespace kiln::data
