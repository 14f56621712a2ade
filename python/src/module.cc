// kiln._kiln: the Python extension behind `import kiln` (python/kiln/__init__.py).
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "kiln/version.h"

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln: eager ops, gradient tapes and traced, JIT-compiled functions";
  m.attr("__version__") = kiln::kVersion;
  kiln::python::bind_errors(m);
  kiln::python::bind_tensor(m);
  kiln::python::bind_ops(m);
  kiln::python::bind_numpy_api(m);
  kiln::python::bind_tape(m);
  kiln::python::bind_function(m);
  kiln::python::bind_variable(m);
  kiln::python::bind_control_flow(m);
  kiln::python::bind_compare_modes(m);
  kiln::python::bind_logging(m);
  kiln::python::bind_keras_layers(m);
  kiln::python::bind_keras_models(m);
  kiln::python::bind_keras_training(m);
  kiln::python::bind_keras_calls(m);
}
