// File helpers shared by kiln's readers and writers.
#pragma once

#include <string>

namespace kiln::io {

// Whole file as bytes; kiln::Error naming the path if it is missing, a directory or unreadable.
std::string read_file(const std::string& path);
// Writes `bytes` to a temporary file beside `path`, flushes it to disk, then renames it over
// `path`: readers see the old file or the new one, never a partial write.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace kiln::io
