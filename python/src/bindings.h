// The parts of the `kiln._kiln` extension module (python/src/module.cc calls each).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "kiln/frontend/tensor.h"
#include "kiln/frontend/variable.h"

namespace kiln::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_tensor(py::module_& m);         // Tensor, kiln.tensor, numpy round trips
void bind_ops(py::module_& m);            // the op table's ops, generated (ops_py.cc)
void bind_tape(py::module_& m);           // GradientTape
void bind_function(py::module_& m);       // kiln.function
void bind_control_flow(py::module_& m);   // kiln.cond, kiln.while_loop, kiln.scan
void bind_compare_modes(py::module_& m);  // kiln.compare_modes
void bind_logging(py::module_& m);        // kiln's warnings as Python warnings
void bind_variable(py::module_& m);       // kiln.Variable (variable_py.cc)
// the op table as data and the helpers of kiln's numpy-style API and keras.ops / keras.random
void bind_numpy_api(py::module_& m);
// kiln.keras (keras_bindings.h): layers, models, training
void bind_keras_layers(py::module_& m);
void bind_keras_models(py::module_& m);
void bind_keras_training(py::module_& m);
void bind_keras_calls(py::module_& m);

// A Tensor from a Python value: a Tensor, a numpy array, or anything numpy.asarray takes
// (lists, scalars). `like` (optional) gives the dtype of a Python scalar.
Tensor to_tensor(const py::handle& value, const Tensor* like = nullptr);

// A Python object that C++ code may copy, keep and destroy on any thread, with or without the
// GIL (a callable stored in a traced graph's gradient, say): copies share one reference, and
// the last copy takes the GIL to drop it (or leaks it once the interpreter is finalizing).
class SharedPyObject {
 public:
  explicit SharedPyObject(py::object o)
      : p_(new py::object(std::move(o)), [](py::object* p) {
          if (!Py_IsInitialized() || _Py_IsFinalizing()) {
            p->release();  // the interpreter is gone: leak the reference
          } else {
            py::gil_scoped_acquire gil;
            delete p;
            return;
          }
          delete p;
        }) {}
  const py::object& get() const { return *p_; }

 private:
  std::shared_ptr<py::object> p_;
};

}  // namespace kiln::python
