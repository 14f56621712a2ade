// kiln.Tensor in Python: dtype/shape, numpy round trips, operators, indexing by ints and
// slices, printing; kiln.tensor(data, dtype=None).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <limits>
#include <string>
#include <vector>

#include "bindings.h"
#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/variable.h"
#include "numpy_interop.h"

namespace kiln::python {
namespace {

py::tuple shape_tuple(const Tensor& t) {
  py::list dims;
  for (int64_t d : t.shape()) {
    if (d == kUnknownDim)
      dims.append(py::none());
    else
      dims.append(d);
  }
  return py::tuple(dims);
}

// x[key] for ints, slices (positive steps) and one Ellipsis; ints drop their axis (numpy).
Tensor index(const Tensor& x, const py::object& key) {
  py::tuple items = py::isinstance<py::tuple>(key) ? py::tuple(key) : py::make_tuple(key);
  const int rank = x.rank();
  int explicit_axes = 0, ellipses = 0;
  for (const py::handle& item : items) {
    if (item.is(py::ellipsis()))
      ++ellipses;
    else
      ++explicit_axes;
  }
  if (ellipses > 1) throw py::index_error("an index can only have a single ellipsis ('...')");
  if (explicit_axes > rank)
    throw py::index_error("too many indices for a tensor of rank " + std::to_string(rank) + ": " +
                          std::to_string(explicit_axes) + " were indexed");
  Axes start, stop, step, dropped;
  auto full_axis = [&] {
    start.push_back(0);
    stop.push_back(std::numeric_limits<int64_t>::max());
    step.push_back(1);
  };
  for (const py::handle& item : items) {
    const int axis = int(start.size());
    if (item.is(py::ellipsis())) {
      for (int k = 0; k < rank - explicit_axes; ++k) full_axis();
      continue;
    }
    const int64_t dim = x.shape()[axis];
    if (py::isinstance<py::slice>(item)) {
      if (dim == kUnknownDim) {
        py::slice s = py::reinterpret_borrow<py::slice>(item);
        if (!s.attr("start").is_none() || !s.attr("stop").is_none() || !s.attr("step").is_none())
          throw py::index_error("slicing axis " + std::to_string(axis) +
                                " of unknown length needs a plain ':'");
        full_axis();
        continue;
      }
      py::ssize_t b = 0, e = 0, st = 0, n = 0;
      if (!py::reinterpret_borrow<py::slice>(item).compute(py::ssize_t(dim), &b, &e, &st, &n))
        throw py::error_already_set();
      if (st <= 0)
        throw py::index_error("kiln tensors are sliced with positive steps only (got step " +
                              std::to_string(st) + "); reverse with kiln.ops.gather");
      start.push_back(b);
      stop.push_back(std::max<py::ssize_t>(e, b));
      step.push_back(st);
    } else if (py::isinstance<py::int_>(item) && !py::isinstance<py::bool_>(item)) {
      int64_t i = item.cast<int64_t>();
      if (dim != kUnknownDim && i < 0) i += dim;
      if (i < 0 || (dim != kUnknownDim && i >= dim))
        throw py::index_error("index " + std::to_string(item.cast<int64_t>()) +
                              " is out of bounds for axis " + std::to_string(axis) + " with size " +
                              std::to_string(dim));
      start.push_back(i);
      stop.push_back(i + 1);
      step.push_back(1);
      dropped.push_back(axis);
    } else {
      throw py::index_error("kiln tensors are indexed by ints, slices and '...'; got " +
                            std::string(py::str(py::type::of(item).attr("__name__"))));
    }
  }
  while (int(start.size()) < rank) full_axis();
  Tensor out = slice(x, start, stop, step);
  return dropped.empty() ? out : squeeze(out, dropped);
}

}  // namespace

Tensor to_tensor(const py::handle& value, const Tensor* like) {
  if (py::isinstance<Tensor>(value)) return value.cast<Tensor>();
  if (py::isinstance<Variable>(value)) return value.cast<Variable>().read();  // variable_py.cc
  if (like != nullptr && (py::isinstance<py::float_>(value) || py::isinstance<py::int_>(value)) &&
      !py::isinstance<py::bool_>(value))
    return scalar(value.cast<double>(), like->dtype());
  if (py::isinstance<py::array>(value))
    return tensor_from_numpy(py::reinterpret_borrow<py::array>(value));
  if (is_numpy_scalar(value))  // keeps its dtype (np.float64 stays float64)
    return tensor_from_numpy(py::module_::import("numpy").attr("asarray")(value));
  // Python lists and scalars: floats become float32 (as in TensorFlow and PyTorch).
  py::array a = py::module_::import("numpy").attr("asarray")(value);
  if (a.dtype().kind() == 'f' && a.dtype().itemsize() == 8) return tensor_from_numpy(a, DType::f32);
  return tensor_from_numpy(a);
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor> t(m, "Tensor",
                       R"(A kiln tensor: concrete (eager) or traced inside kiln.function.

Convert with kiln.tensor(data) and back with .numpy() (a read-only view of kiln's buffer).)");
  t.def_property_readonly("shape", &shape_tuple)
      .def_property_readonly("dtype",
                             [](const Tensor& x) { return std::string(dtype_name(x.dtype())); })
      .def_property_readonly("ndim", [](const Tensor& x) { return x.rank(); })
      .def_property_readonly("size", [](const Tensor& x) { return x.size(); })
      .def_property_readonly("is_traced", &Tensor::is_traced)
      .def_property(
          "_keras_mask",
          [](const Tensor& x) -> py::object {
            Tensor m = x.keras_mask();
            return m.defined() ? py::cast(m) : py::none();
          },
          [](Tensor& x, const py::handle& mask) {
            x = x.with_keras_mask(mask.is_none() ? Tensor() : to_tensor(mask));
          },
          "Keras' mask of this tensor (a bool tensor, True where a step is kept), set by the "
          "layer that made it (Embedding(mask_zero=True), Masking, a layer called with "
          "mask=...); None when it has none.")
      .def("numpy", &numpy_view, "The data as a read-only numpy array sharing kiln's buffer.")
      .def(
          "__array__",
          [](const Tensor& x, py::object dtype, py::object copy) -> py::object {
            py::array v = numpy_view(x);
            if (!dtype.is_none()) return v.attr("astype")(dtype);
            if (!copy.is_none() && copy.cast<bool>()) return v.attr("copy")();
            return v;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("__len__",
           [](const Tensor& x) {
             if (x.rank() == 0) throw py::type_error("len() of a 0-d tensor");
             return x.shape()[0];
           })
      .def("__repr__",
           [](const Tensor& x) {
             std::string s = x.to_string();  // "<Tensor ...>" -> "<kiln.Tensor ...>"
             return s.rfind("<", 0) == 0 ? "<kiln." + s.substr(1) : s;
           })
      .def("__str__", &Tensor::to_string)
      .def("__getitem__", &index)
      .def("__bool__",
           [](const Tensor& x) {
             if (x.is_symbolic())
               throw py::type_error(
                   "the truth value of a traced tensor is not known while tracing; use "
                   "kiln.cond or kiln.where instead of a Python if");
             if (x.size() != 1)
               throw py::value_error(
                   "the truth value of a tensor with more than one element is ambiguous");
             return x.item<double>() != 0;
           })
      .def("__float__", [](const Tensor& x) { return x.item<double>(); })
      .def("__int__", [](const Tensor& x) { return x.item<int64_t>(); })
      .def("__neg__", [](const Tensor& x) { return -x; })
      .def("__add__", [](const Tensor& a, py::handle b) { return a + to_tensor(b, &a); })
      .def("__radd__", [](const Tensor& a, py::handle b) { return to_tensor(b, &a) + a; })
      .def("__sub__", [](const Tensor& a, py::handle b) { return a - to_tensor(b, &a); })
      .def("__rsub__", [](const Tensor& a, py::handle b) { return to_tensor(b, &a) - a; })
      .def("__mul__", [](const Tensor& a, py::handle b) { return a * to_tensor(b, &a); })
      .def("__rmul__", [](const Tensor& a, py::handle b) { return to_tensor(b, &a) * a; })
      .def("__truediv__", [](const Tensor& a, py::handle b) { return a / to_tensor(b, &a); })
      .def("__rtruediv__", [](const Tensor& a, py::handle b) { return to_tensor(b, &a) / a; })
      .def("__pow__", [](const Tensor& a, py::handle b) { return pow(a, to_tensor(b, &a)); })
      .def("__matmul__", [](const Tensor& a, py::handle b) { return matmul(a, to_tensor(b, &a)); })
      .def("__rmatmul__", [](const Tensor& a, py::handle b) { return matmul(to_tensor(b, &a), a); })
      .def("__lt__", [](const Tensor& a, py::handle b) { return less(a, to_tensor(b, &a)); })
      .def("__le__", [](const Tensor& a, py::handle b) { return less_equal(a, to_tensor(b, &a)); })
      .def("__gt__", [](const Tensor& a, py::handle b) { return greater(a, to_tensor(b, &a)); })
      .def("__ge__",
           [](const Tensor& a, py::handle b) { return greater_equal(a, to_tensor(b, &a)); });
  t.attr("__array_priority__") = 1000;

  m.def(
      "tensor",
      [](py::handle data, py::object dtype) {
        if (dtype.is_none()) return to_tensor(data);
        DType want = dtype_from_python(dtype);
        if (py::isinstance<Tensor>(data)) {
          Tensor x = data.cast<Tensor>();
          return x.dtype() == want ? x : cast(x, want);
        }
        py::array a = py::module_::import("numpy").attr("asarray")(data);
        return tensor_from_numpy(a, want);
      },
      py::arg("data"), py::arg("dtype") = py::none(),
      R"(A tensor from a numpy array, a nested list or a scalar.

A C-contiguous numpy array with 64-byte-aligned data and one of kiln's dtypes is used without a
copy (writing into the array afterwards changes the tensor); anything else is copied. Python
floats become float32 unless `dtype` says otherwise.)");
  m.def(
      "tensor_shares_memory",
      [](const Tensor& x, const py::array& a) { return x.array().raw() == a.data(); },
      "Whether the tensor's buffer is the numpy array's (zero-copy conversion).");
}

}  // namespace kiln::python
