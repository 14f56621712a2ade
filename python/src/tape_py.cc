// kiln.GradientTape as a context manager (TensorFlow's form): it records inside the `with`
// block and stays usable after it for gradient(); persistent tapes answer several gradient()
// calls.
#include <pybind11/stl.h>

#include <memory>
#include <vector>

#include "bindings.h"
#include "kiln/frontend/gradient_tape.h"

namespace kiln::python {
namespace {

class PyGradientTape {
 public:
  explicit PyGradientTape(bool persistent) : persistent_(persistent) {}
  ~PyGradientTape() {
    stopped_.reset();  // before the tape it refers to
    tape_.reset();
  }

  PyGradientTape& enter() {
    if (tape_) throw Error("GradientTape: a tape can be entered only once; create a new one");
    tape_ = std::make_unique<GradientTape>(persistent_);
    return *this;
  }
  void exit() {
    if (tape_ && !stopped_) stopped_ = std::make_unique<GradientTape::StopRecording>(*tape_);
  }
  void watch(const py::handle& x) {
    for (const Tensor& t : tensors(x, "watch")) started("watch").watch(t);
  }
  py::object gradient(const Tensor& target, const py::handle& sources,
                      const py::object& output_gradients, const std::string& unconnected) {
    UnconnectedGradients mode;
    if (unconnected == "none")
      mode = UnconnectedGradients::kNone;
    else if (unconnected == "zero")
      mode = UnconnectedGradients::kZero;
    else
      throw Error(
          "GradientTape.gradient: unconnected_gradients must be \"none\" or \"zero\", got \"" +
          unconnected + "\"");
    Tensor seed = output_gradients.is_none() ? Tensor() : to_tensor(output_gradients, &target);
    std::vector<Tensor> grads =
        started("gradient").gradient(target, tensors(sources, "gradient"), mode, seed);
    auto wrap = [](const Tensor& g) -> py::object {
      return g.defined() ? py::cast(g) : py::none();
    };
    if (py::isinstance<Tensor>(sources)) return wrap(grads.at(0));
    py::list out;
    for (const Tensor& g : grads) out.append(wrap(g));
    return py::isinstance<py::tuple>(sources) ? py::object(py::tuple(out)) : py::object(out);
  }

 private:
  GradientTape& started(const char* what) {
    if (!tape_)
      throw Error(std::string("GradientTape.") + what +
                  ": the tape has not been entered; use it as `with kiln.GradientTape() as tape:`");
    return *tape_;
  }
  static std::vector<Tensor> tensors(const py::handle& x, const char* what) {
    if (py::isinstance<Tensor>(x)) return {x.cast<Tensor>()};
    // A variable stands for its current value (GradientTape::gradient(target, variables)).
    if (py::isinstance<Variable>(x)) return {x.cast<Variable>().value()};
    if (py::isinstance<py::list>(x) || py::isinstance<py::tuple>(x)) {
      std::vector<Tensor> out;
      for (const py::handle& e : x) {
        if (py::isinstance<Variable>(e)) {
          out.push_back(e.cast<Variable>().value());
          continue;
        }
        if (!py::isinstance<Tensor>(e))
          throw py::type_error(std::string("GradientTape.") + what +
                               ": expected kiln.Tensor or kiln.Variable elements, got " +
                               std::string(py::str(py::type::of(e).attr("__name__"))));
        out.push_back(e.cast<Tensor>());
      }
      return out;
    }
    throw py::type_error(std::string("GradientTape.") + what +
                         ": expected a kiln.Tensor, a kiln.Variable or a list of them, got " +
                         std::string(py::str(py::type::of(x).attr("__name__"))));
  }

  bool persistent_;
  std::unique_ptr<GradientTape> tape_;
  std::unique_ptr<GradientTape::StopRecording> stopped_;
};

}  // namespace

void bind_tape(py::module_& m) {
  py::class_<PyGradientTape>(m, "GradientTape", R"(Reverse-mode autodiff, as tf.GradientTape:

    with kiln.GradientTape() as tape:
        tape.watch(x)
        y = (x * x).sum() ...
    dx = tape.gradient(y, x))")
      .def(py::init<bool>(), py::arg("persistent") = false)
      .def("__enter__", &PyGradientTape::enter, py::return_value_policy::reference)
      .def("__exit__", [](PyGradientTape& t, py::handle, py::handle, py::handle) { t.exit(); })
      .def("watch", &PyGradientTape::watch, py::arg("tensor"))
      .def("gradient", &PyGradientTape::gradient, py::arg("target"), py::arg("sources"),
           py::arg("output_gradients") = py::none(), py::arg("unconnected_gradients") = "none");
}

}  // namespace kiln::python
