// Writing files safely, shared by every module that writes (weights, .npy, IR dumps): the bytes
// go to a temporary file beside the target, are flushed, then renamed over it, so readers see
// the old file or the new one, never a partial write.
#pragma once

#include <string>
#include <string_view>

namespace kiln::runtime {

// kiln::Error naming the path (and what to check) on failure; the temporary is removed.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace kiln::runtime
