// PyFunction: the object behind kiln.function (function_py.cc), shared with
// kiln.compare_modes (compare_modes_py.cc). It keeps the Python callable and a FunctionCore:
// a call flattens its arguments (Tensors and numpy arrays traced, None/bool/int/float/str part
// of the signature), runs the core with the GIL released (the body takes it back to trace) and
// gives the result the structure the callable returned.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "bindings.h"
#include "kiln/frontend/function/function.h"

namespace kiln::python {

// How a call's arguments map onto the traced function's tensor parameters.
struct FlatArguments {
  std::vector<Tensor> tensors;
  uint64_t static_hash = 0;
  // Per positional argument then per keyword: the tensor index, or -1 for a static value.
  std::vector<int> slots;
};

FlatArguments flatten_arguments(const py::args& args, const py::kwargs& kwargs);

enum class ResultKind { kNone, kTensor, kTuple, kList };

class PyFunction {
 public:
  PyFunction(py::function fn, FunctionOptions options);

  py::object call(const py::args& args, const py::kwargs& kwargs);
  ConcreteFunction concrete(const py::args& args, const py::kwargs& kwargs);
  // Seconds per call when C++ makes `calls` calls on these arguments (benchmark support).
  double time_cpp_calls(int calls, const py::args& args, const py::kwargs& kwargs);
  detail::FunctionCore& core() { return *core_; }
  // The Python callable.
  const py::function& callable() const { return fn_; }

 private:
  // One call's arguments, for the body that traces them.
  struct CallSite {
    PyFunction* self;
    const py::args* args;
    const py::kwargs* kwargs;
    const FlatArguments* flat;
  };
  detail::FunctionCore::Body make_body(const CallSite& site);
  py::object unflatten(uint64_t key, std::vector<Tensor> out);

  struct Kinds {
    std::mutex mutex;
    std::map<std::pair<uint64_t, size_t>, ResultKind> by_signature;
  };
  py::function fn_;
  std::shared_ptr<detail::FunctionCore> core_;
  std::shared_ptr<Kinds> kinds_ = std::make_shared<Kinds>();
};

}  // namespace kiln::python
