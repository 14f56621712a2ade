// Debugging and tuning knobs read from the environment, all in this one place.
// Each has an API equivalent (e.g. set_num_threads for KILN_NUM_THREADS); see docs/debugging.md.
#pragma once

#include <optional>
#include <string>

namespace kiln::runtime::knobs {

// KILN_NUM_THREADS: size of kiln's task arena (default: hardware concurrency).
// Returns nullopt when unset; throws kiln::Error on a value that is not a positive integer.
std::optional<int> num_threads();

// KILN_LOG: "warning" (default), "info" or "debug".
std::string log_level();

// KILN_DATA_DIR: where the shipped data sets (digits.csv.gz) are read from; nullopt if unset.
std::optional<std::string> data_dir();

}  // namespace kiln::runtime::knobs
