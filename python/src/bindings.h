// The parts of the `kiln._kiln` extension module (python/src/module.cc calls each).
#pragma once

#include <pybind11/pybind11.h>

#include "kiln/frontend/tensor.h"
#include "kiln/frontend/variable.h"

namespace kiln::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_tensor(py::module_& m);    // Tensor, kiln.tensor, numpy round trips
void bind_ops(py::module_& m);       // the op table's ops, generated (ops_py.cc)
void bind_tape(py::module_& m);      // GradientTape
void bind_function(py::module_& m);  // kiln.function
void bind_variable(py::module_& m);  // kiln.Variable (variable_py.cc)
// kiln.keras (keras_bindings.h): layers, models, training
void bind_keras_layers(py::module_& m);
void bind_keras_models(py::module_& m);
void bind_keras_training(py::module_& m);

// A Tensor from a Python value: a Tensor, a numpy array, or anything numpy.asarray takes
// (lists, scalars). `like` (optional) gives the dtype of a Python scalar.
Tensor to_tensor(const py::handle& value, const Tensor* like = nullptr);

}  // namespace kiln::python
