// How many internal errors (KILN_ASSERT failures, internal_error calls; ir/error.h) this
// process has raised. The fuzz harnesses use it to tell a kiln bug from a kiln::Error about
// bad input: the message alone cannot, as the input may contain any text.
#pragma once

#include <cstdint>

namespace kiln {

int64_t internal_error_count();

}  // namespace kiln
