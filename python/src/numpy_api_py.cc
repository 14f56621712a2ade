// What kiln/_numpy_api.py, kiln/keras/ops.py and kiln/keras/random.py build on:
//   kiln._kiln._op_table()  the op table (ir/ops.def) as data: per op its name, arity, traits,
//                           dtype class and attributes (name, kind, default if any), from which
//                           the numpy-style functions kiln.sum, kiln.matmul, ... are generated;
//   squeeze / expand_dims / stack, the C++ API's compositions of table ops (frontend/ops.h);
//   dropout with a seed tensor, SeedGenerator (frontend/seed_generator.h) and the global seed
//   sequence, for kiln.keras.random.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/seed_generator.h"
#include "kiln/ir/op_table.h"
#include "kiln/keras/layers/initializers.h"
#include "numpy_interop.h"

namespace kiln::python {
namespace {

py::object attr_to_python(const AttrValue& v) {
  switch (attr_kind_of(v)) {
    case AttrKind::i64:
      return py::int_(std::get<int64_t>(v));
    case AttrKind::f64:
      return py::float_(std::get<double>(v));
    case AttrKind::boolean:
      return py::bool_(std::get<bool>(v));
    case AttrKind::str:
      return py::str(std::get<std::string>(v));
    case AttrKind::i64s: {
      py::list out;
      for (int64_t i : std::get<std::vector<int64_t>>(v)) out.append(i);
      return py::tuple(out);
    }
    case AttrKind::dtype:
      return py::str(std::string(dtype_name(std::get<DType>(v))));
  }
  return py::none();
}

py::list op_table() {
  py::list rows;
  for (const OpInfo& op : all_ops()) {
    py::list attrs;
    for (const AttrSpec& a : op.attrs) {
      py::dict d;
      d["name"] = a.name;
      d["kind"] = schema_kind_word(a.kind);
      d["has_default"] = a.default_value.has_value();
      d["default"] = a.default_value ? attr_to_python(*a.default_value) : py::none();
      attrs.append(d);
    }
    py::list traits;
    for (std::string_view t : trait_names(op.traits)) traits.append(std::string(t));
    py::dict row;
    row["name"] = op.name;
    row["arity"] = op.arity;
    row["traits"] = py::tuple(traits);
    row["dtypes"] = dtype_class_word(op.dtypes);
    row["dtypes_description"] = std::string(dtype_class_description(op.dtypes));
    row["bf16"] = bf16_rule_word(op.bf16);
    row["attrs"] = attrs;
    rows.append(row);
  }
  return rows;
}

std::vector<int64_t> ints_from(const py::handle& v, const char* what) {
  if (py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v)) return {v.cast<int64_t>()};
  if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v))
    throw Error(fmt::format("{} must be an int or a sequence of ints, got {}", what,
                            std::string(py::repr(v))));
  std::vector<int64_t> out;
  for (const py::handle& x : py::reinterpret_borrow<py::sequence>(v)) {
    if (!py::isinstance<py::int_>(x) || py::isinstance<py::bool_>(x))
      throw Error(fmt::format("{} must be an int or a sequence of ints, got {}", what,
                              std::string(py::repr(v))));
    out.push_back(x.cast<int64_t>());
  }
  return out;
}

std::vector<Tensor> tensors_from(const py::handle& xs, const char* op) {
  if (!py::isinstance<py::sequence>(xs) || py::isinstance<py::str>(xs) ||
      py::isinstance<Tensor>(xs))
    throw Error(
        fmt::format("{}: expected a sequence of tensors, got {}", op, std::string(py::repr(xs))));
  std::vector<Tensor> out;
  Tensor first;
  for (const py::handle& x : py::reinterpret_borrow<py::sequence>(xs))
    if (py::isinstance<Tensor>(x) || py::isinstance<Variable>(x)) {
      first = to_tensor(x);
      break;
    }
  for (const py::handle& x : py::reinterpret_borrow<py::sequence>(xs))
    out.push_back(to_tensor(x, first.defined() ? &first : nullptr));
  return out;
}

}  // namespace

void bind_numpy_api(py::module_& m) {
  m.def("_op_table", &op_table,
        "The op table (ir/ops.def) as a list of dicts: name, arity (-1: one or more), traits, "
        "dtypes, attrs (name, kind, has_default, default).");
  m.def(
      "_squeeze",
      [](const py::handle& x, const py::handle& axis) {
        Axes axes = axis.is_none() ? Axes{} : ints_from(axis, "squeeze: axis");
        return squeeze(to_tensor(x), axes);
      },
      py::arg("x"), py::arg("axis") = py::none());
  m.def(
      "_expand_dims",
      [](const py::handle& x, int64_t axis) { return expand_dims(to_tensor(x), axis); },
      py::arg("x"), py::arg("axis"));
  m.def(
      "_stack",
      [](const py::handle& xs, int64_t axis) { return stack(tensors_from(xs, "stack"), axis); },
      py::arg("arrays"), py::arg("axis") = 0);
  m.def(
      "_dropout",
      [](const py::handle& x, double rate, const py::handle& seed) {
        return dropout(to_tensor(x), rate, to_tensor(seed));
      },
      py::arg("x"), py::arg("rate"), py::arg("seed"));
  m.def("_next_global_seed", &next_global_seed,
        "The next seed of kiln's global seed sequence (keras.utils.set_random_seed resets it).");
  // An int64 scalar seed that a trace records as it is (a graph constant), so that a random op
  // given an integer seed draws inside a kiln.function what it draws eagerly, as Keras' integer
  // seeds do; outside a trace, the concrete tensor.
  m.def("_fixed_seed", [](int64_t seed) {
    Tensor t = tensor<int64_t>({seed}, Shape{});
    if (detail::TraceContext* ctx = detail::TraceContext::current())
      return ctx->wrap(ctx->value_of(t));
    return t;
  });

  // kiln.keras.initializers: Keras' serialized initializer (class name, config numbers, seed),
  // built as the layers' configs build it (initializer_from_keras), called on a shape.
  m.def(
      "_initialize",
      [](const std::string& name, const std::map<std::string, double>& args,
         std::optional<int64_t> seed, const py::handle& shape, const py::handle& dtype) {
        Axes dims = ints_from(shape, "initializer: shape");
        for (int64_t d : dims)
          if (d < 0)
            throw Error(fmt::format("initializer {}: shape {} has a negative dimension", name,
                                    std::string(py::repr(shape))));
        Initializer init = initializer_from_keras(name, args, seed);
        DType t = dtype.is_none() ? DType::f32 : dtype_from_python(dtype);
        return init(Shape(dims), t);
      },
      py::arg("name"), py::arg("args"), py::arg("seed"), py::arg("shape"), py::arg("dtype"));

  py::class_<SeedGenerator>(m, "SeedGenerator",
                            "Keras 3's SeedGenerator over kiln::SeedGenerator: an int64 state "
                            "variable; each next() returns the state as a seed and adds one.")
      .def(py::init([](py::object seed, py::object name) {
             std::optional<int64_t> s;
             if (!seed.is_none()) {
               if (!py::isinstance<py::int_>(seed) || py::isinstance<py::bool_>(seed))
                 throw Error(fmt::format("SeedGenerator: seed must be an int or None, got {}",
                                         std::string(py::repr(seed))));
               s = seed.cast<int64_t>();
             }
             return SeedGenerator(s, name.is_none() ? std::string() : name.cast<std::string>());
           }),
           py::arg("seed") = py::none(), py::arg("name") = py::none())
      .def("next", &SeedGenerator::next,
           "The seed of the next draw (an int64 scalar tensor); advances the state by one.")
      .def_property_readonly(
          "state", [](const SeedGenerator& g) { return g.state(); },
          "The int64 state variable (Keras' SeedGenerator.state).");
}

}  // namespace kiln::python
