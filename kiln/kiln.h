// kiln: the one header users include.
#pragma once

#include "frontend/creation.h"
#include "frontend/gradient_tape.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "runtime/threading.h"

namespace kiln {
// "0.1.0"
inline constexpr const char* kVersion = KILN_VERSION;
}  // namespace kiln
