// kiln: the one header users include.
#pragma once

#include "frontend/creation.h"
#include "frontend/data/dataset.h"
#include "frontend/data/digits.h"
#include "frontend/data/mnist.h"
#include "frontend/function/compare_modes.h"
#include "frontend/function/compiled_form.h"
#include "frontend/function/concrete_function.h"
#include "frontend/function/control_flow.h"
#include "frontend/function/function.h"
#include "frontend/function/function_scope.h"
#include "frontend/function/trace_context.h"
#include "frontend/gradient_tape.h"
#include "frontend/io/npy.h"
#include "frontend/io/safetensors.h"
#include "frontend/layers/layer.h"
#include "frontend/layers/layers.h"
#include "frontend/models/functional.h"
#include "frontend/models/input_layer.h"
#include "frontend/models/model.h"
#include "frontend/models/sequential.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "frontend/training/callbacks.h"
#include "frontend/training/loss.h"
#include "frontend/training/metric.h"
#include "frontend/training/optimizer.h"
#include "frontend/variable.h"
#include "runtime/log.h"
#include "runtime/profiler.h"
#include "runtime/threading.h"

namespace kiln {
// "0.1.0"
inline constexpr const char* kVersion = KILN_VERSION;
}  // namespace kiln
