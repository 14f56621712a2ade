// Writing files safely, shared by every module that writes (weights, .npy, IR dumps): the bytes
// go to a temporary file beside the target, are flushed (fsync), then renamed over it and the
// directory is flushed too, so readers see the old file or the new one, never a partial write,
// even if the writer is killed at any moment. Each call uses its own temporary
// (`<path>.tmp.<pid>.<n>`), so threads and processes may write the same path concurrently: the
// last rename wins and every reader sees one complete version.
//
// A writer killed before its rename leaves its temporary behind. The first write of a process
// into a directory removes the stale temporaries there: names `<anything>.tmp.<pid>.<n>` whose
// process no longer exists and whose last change is at least 2 seconds old (so a temporary being
// written by a process of another pid namespace sharing the directory is left alone).
#pragma once

#include <string>
#include <string_view>

namespace kiln::runtime {

// kiln::Error naming the path (and what to check) on failure; the temporary is removed.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace kiln::runtime
