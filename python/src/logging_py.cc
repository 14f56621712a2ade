// kiln's log messages in Python: warnings (a retrace warning, say) become Python warnings of
// category kiln.KilnWarning (a UserWarning), so `warnings` filters, pytest.warns and
// `-W error` see them; info and debug messages go to the Python logger "kiln". A message
// logged on a thread without the GIL takes it. If a warnings filter turns the warning into an
// exception, the exception cannot cross kiln's C++ code: it is reported through
// sys.unraisablehook and the call goes on.
#include <string>
#include <string_view>

#include "bindings.h"
#include "kiln/runtime/log.h"

namespace kiln::python {
namespace {

py::handle kiln_warning;  // kiln.KilnWarning

void python_sink(LogLevel level, std::string_view message) {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
  py::gil_scoped_acquire gil;
  try {
    if (level == LogLevel::kWarning) {
      py::module_::import("warnings")
          .attr("warn")(py::str(std::string(message)), kiln_warning, py::arg("stacklevel") = 2);
    } else {
      py::object logger = py::module_::import("logging").attr("getLogger")("kiln");
      logger.attr(level == LogLevel::kInfo ? "info" : "debug")(py::str(std::string(message)));
    }
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("kiln's log message");
  }
}

}  // namespace

void bind_logging(py::module_& m) {
  kiln_warning = PyErr_NewExceptionWithDoc("kiln._kiln.KilnWarning",
                                           "A warning from kiln (retracing, fallbacks, ...).",
                                           PyExc_UserWarning, nullptr);
  m.attr("KilnWarning") = kiln_warning;
  set_log_sink(&python_sink);
  // Back to stderr before the interpreter goes away (kiln may log from its own threads later).
  py::module_::import("atexit").attr("register")(py::cpp_function([] { set_log_sink(nullptr); }));
}

}  // namespace kiln::python
