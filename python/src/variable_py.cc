// kiln.Variable: kiln::Variable in Python (tf.Variable's form). A Variable is usable wherever
// a Tensor is: operators, kiln.ops, numpy conversion and GradientTape.gradient(loss, [vars])
// read its current value (Variable::read, so recording tapes watch trainable variables);
// inside kiln.function a read is a captured input of the graph and assign / assign_add /
// assign_sub are assignment nodes (the function's variable tracking sees it). Variables passed
// as arguments to a kiln.function are part of the signature by identity (function_py.cc).
// The initial value is always copied into a buffer of kiln's own, so writing into the numpy
// array afterwards does not change the variable and compiled steps may update it in place.
#include <pybind11/stl.h>

#include <string>

#include "bindings.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/variable.h"
#include "numpy_interop.h"

namespace kiln::python {
namespace {

py::tuple variable_shape(const Variable& v) {
  py::list dims;
  for (int64_t d : v.shape()) dims.append(d);
  return py::tuple(dims);
}

// Python operators on a Variable: those of its current value (a Tensor), so that numpy and
// Python scalars combine with it exactly as with a Tensor.
void forward_operator(py::class_<Variable>& cls, const char* name) {
  cls.def(name, [name](const Variable& v, py::handle other) {
    return py::cast(v.read()).attr(name)(other);
  });
}

}  // namespace

void bind_variable(py::module_& m) {
  py::class_<Variable> cls(m, "Variable", R"(A mutable, named tensor (kiln::Variable; tf.Variable).

    v = kiln.Variable(np.zeros((3,), np.float32), name="w")
    v.assign_add(np.ones(3, np.float32))
    with kiln.GradientTape() as tape:
        loss = kiln.ops.sum(v * v, axes=[0], keepdims=False)
    [dv] = tape.gradient(loss, [v])

Usable wherever a kiln.Tensor is (operators, kiln.ops, np.asarray); inside kiln.function
reads and assignments are recorded in the graph.)");
  cls.def(
         py::init([](py::handle initial_value, std::string name, bool trainable, py::object dtype) {
           Tensor value = to_tensor(initial_value);
           if (!dtype.is_none()) {
             DType want = dtype_from_python(dtype);
             if (value.dtype() != want) value = cast(value, want);
           }
           if (value.is_symbolic())
             throw Error("kiln.Variable \"" + name +
                         "\": the initial value must be concrete (a numpy array or an eager "
                         "kiln.Tensor), not a traced tensor");
           // A buffer of kiln's own: not the caller's numpy memory, not shared with a Tensor.
           return Variable(std::move(name), copy(value), trainable);
         }),
         py::arg("initial_value"), py::arg("name") = "Variable", py::arg("trainable") = true,
         py::arg("dtype") = py::none())
      .def_property_readonly("name", &Variable::name,
                             "The variable's name: a layer's weights are named by their place, "
                             "\"<layer>/<weight>\" (\"dense_1/kernel\"), as Keras 3's path.")
      .def_property_readonly("path", &Variable::name,
                             "Keras 3's Variable.path: \"<layer>/<weight>\" for a layer's "
                             "weights (kiln's name is this path; Keras' name is its last part).")
      .def_property("trainable", &Variable::trainable, &Variable::set_trainable)
      .def_property_readonly("shape", &variable_shape)
      .def_property_readonly("dtype",
                             [](const Variable& v) { return std::string(dtype_name(v.dtype())); })
      .def_property_readonly("ndim", [](const Variable& v) { return v.shape().rank(); })
      .def(
          "value", [](const Variable& v) { return v.read(); },
          "The current value as a kiln.Tensor (watched by recording tapes when trainable).")
      .def(
          "read_value", [](const Variable& v) { return v.read(); }, "The same as value().")
      .def(
          "numpy", [](const Variable& v) { return numpy_view(v.value()); },
          "The current value as a read-only numpy array (it does not follow later "
          "assignments).")
      .def(
          "__array__",
          [](const Variable& v, py::object dtype, py::object copy_flag) -> py::object {
            py::array a = numpy_view(v.value());
            if (!dtype.is_none()) return a.attr("astype")(dtype);
            if (!copy_flag.is_none() && copy_flag.cast<bool>()) return a.attr("copy")();
            return a;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def(
          "assign",
          [](Variable& v, py::handle value) {
            Tensor now = v.value();
            v.assign(to_tensor(value, &now));
            return v;
          },
          py::arg("value"), "Replaces the value (same dtype and shape); returns the variable.")
      .def(
          "assign_add",
          [](Variable& v, py::handle delta) {
            Tensor now = v.value();
            v.assign_add(to_tensor(delta, &now));
            return v;
          },
          py::arg("delta"))
      .def(
          "assign_sub",
          [](Variable& v, py::handle delta) {
            Tensor now = v.value();
            v.assign_sub(to_tensor(delta, &now));
            return v;
          },
          py::arg("delta"))
      .def("__len__",
           [](const Variable& v) {
             if (v.shape().rank() == 0) throw py::type_error("len() of a 0-d variable");
             return v.shape()[0];
           })
      .def("__repr__",
           [](const Variable& v) {
             return "<kiln.Variable '" + v.name() + "' " + v.value().type().to_string() +
                    (v.trainable() ? "" : " non-trainable") + ">";
           })
      .def("__getitem__",
           [](const Variable& v, py::handle key) {
             return py::cast(v.read()).attr("__getitem__")(key);
           })
      .def("__float__", [](const Variable& v) { return v.value().item<double>(); })
      .def("__int__", [](const Variable& v) { return v.value().item<int64_t>(); })
      .def("__neg__", [](const Variable& v) { return -v.read(); })
      .def("__hash__",
           [](const Variable& v) {
             return py::hash(py::int_(reinterpret_cast<uintptr_t>(v.handle_id())));
           })
      .def("__eq__", [](const Variable& a, py::handle b) -> py::object {
        // Identity, as tf.Variable in sets and dicts; compare values with kiln.ops.equal.
        if (!py::isinstance<Variable>(b)) return py::bool_(false);
        return py::bool_(a == b.cast<Variable>());
      });
  for (const char* op : {"__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                         "__truediv__", "__rtruediv__", "__pow__", "__matmul__", "__rmatmul__",
                         "__lt__", "__le__", "__gt__", "__ge__"})
    forward_operator(cls, op);
  cls.attr("__array_priority__") = 1000;
}

}  // namespace kiln::python
