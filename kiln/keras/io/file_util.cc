#include "kiln/keras/io/file_util.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/ir/error.h"
#include "kiln/runtime/file_io.h"

namespace kiln::io {

std::string read_file(const std::string& path) {
  // (An ifstream opens a directory and then reads nothing: the file would look empty.)
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(fmt::format("cannot read \"{}\": it is a directory, not a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("cannot open \"{}\" for reading: {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("error while reading \"{}\"", path));
  return ss.str();
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  runtime::write_file_atomically(path, bytes);
}

}  // namespace kiln::io
