#include "kiln/passes/pass.h"

namespace kiln::passes {

Pass::~Pass() = default;

}  // namespace kiln::passes
