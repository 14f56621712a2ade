// File writing for IR dumps. (frontend/io/file_util.h has the same helper for the frontend;
// passes/ may not include frontend/, so this is its own small copy.)
#pragma once

#include <string>
#include <string_view>

namespace kiln::passes {

// Writes `bytes` to a temporary file beside `path`, flushes it, then renames it over `path`:
// readers see the old file or the new one, never a partial write. kiln::Error naming the path
// on failure.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace kiln::passes
