// kiln::Error -> kiln.Error (a ValueError); kiln::DTypeError -> kiln.DTypeError (a kiln.Error
// and a TypeError). The message is kiln's, unchanged.
#include "bindings.h"
#include "kiln/ir/error.h"

namespace kiln::python {

void bind_errors(py::module_& m) {
  static py::exception<Error> error(m, "Error", PyExc_ValueError);
  static py::handle dtype_error;
  py::tuple bases = py::make_tuple(error, py::handle(PyExc_TypeError));
  dtype_error = PyErr_NewException("kiln._kiln.DTypeError", bases.ptr(), nullptr);
  m.attr("DTypeError") = dtype_error;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const DTypeError& e) {
      PyErr_SetString(dtype_error.ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
}

}  // namespace kiln::python
