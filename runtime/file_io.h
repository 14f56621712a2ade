// Writing files safely, shared by every module that writes (weights, .npy, IR dumps): the bytes
// go to a temporary file beside the target, are flushed, then renamed over it, so readers see
// the old file or the new one, never a partial write. Each call uses its own temporary
// (`<path>.tmp.<pid>.<n>`), so threads and processes may write the same path concurrently: the
// last rename wins and every reader sees one complete version.
#pragma once

#include <string>
#include <string_view>

namespace kiln::runtime {

// kiln::Error naming the path (and what to check) on failure; the temporary is removed.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace kiln::runtime
