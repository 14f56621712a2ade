// kiln.ops: one Python function per row of the op table (ir/ops.def), generated at import:
// kiln.ops.NAME(*inputs, **attributes). Inputs are tensors (numpy arrays and Python scalars
// are converted; a scalar takes the dtype of the first tensor input); the attributes are the
// row's schema, all required, by keyword. Type checks and errors are the C++ dispatcher's.
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "kiln/frontend/dispatch.h"
#include "kiln/ir/op_table.h"
#include "numpy_interop.h"

namespace kiln::python {
namespace {

AttrValue attr_from_python(const OpInfo& op, const AttrSpec& spec, const py::handle& v) {
  auto wrong = [&](const char* want) {
    return Error(fmt::format("{}: attribute \"{}\" must be {}, got {}", op.name, spec.name, want,
                             std::string(py::repr(v))));
  };
  switch (spec.kind) {
    case AttrKind::i64:
      if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) throw wrong("an int");
      return v.cast<int64_t>();
    case AttrKind::f64:
      if (!py::isinstance<py::float_>(v) && !py::isinstance<py::int_>(v)) throw wrong("a float");
      return v.cast<double>();
    case AttrKind::boolean:
      if (!py::isinstance<py::bool_>(v)) throw wrong("a bool");
      return v.cast<bool>();
    case AttrKind::str:
      if (!py::isinstance<py::str>(v)) throw wrong("a str");
      return v.cast<std::string>();
    case AttrKind::i64s: {
      if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v))
        throw wrong("a list of ints");
      std::vector<int64_t> out;
      for (const py::handle& x : py::reinterpret_borrow<py::sequence>(v)) {
        if (!py::isinstance<py::int_>(x) || py::isinstance<py::bool_>(x))
          throw wrong("a list of ints");
        out.push_back(x.cast<int64_t>());
      }
      return out;
    }
    case AttrKind::dtype:
      return dtype_from_python(v);
  }
  throw wrong("a known attribute kind");
}

std::string signature_doc(const OpInfo& op) {
  std::string inputs = op.arity < 0 ? "*inputs" : "";
  for (int i = 0; i < op.arity; ++i) inputs += (i ? ", x" : "x") + std::to_string(i);
  std::string attrs;
  for (const AttrSpec& a : op.attrs)
    attrs += fmt::format(", {}: {}", a.name, attr_kind_name(a.kind));
  return fmt::format(
      "{}({}{})\n\nkiln op \"{}\" (ir/ops.def): {} input(s) of dtype class {}; every attribute is "
      "required, by keyword.",
      op.name, inputs, attrs.empty() ? "" : ", *" + attrs, op.name,
      op.arity < 0 ? std::string("one or more") : std::to_string(op.arity),
      std::string(dtype_class_description(op.dtypes)));
}

}  // namespace

void bind_ops(py::module_& m) {
  py::module_ ops = m.def_submodule("ops", "kiln's ops, one per row of the op table");
  py::list names;
  for (const OpInfo& info : all_ops()) {
    const OpInfo* op = &info;
    names.append(op->name);
    ops.def(
        op->name,
        [op](py::args args, py::kwargs kwargs) {
          std::vector<Tensor> inputs;
          const Tensor* like = nullptr;
          for (const py::handle& a : args)
            if (py::isinstance<Tensor>(a)) {
              inputs.push_back(a.cast<Tensor>());
              like = &inputs.back();
              break;
            } else if (py::isinstance<Variable>(a)) {  // a variable's dtype, as a tensor's
              inputs.push_back(a.cast<Variable>().value());
              like = &inputs.back();
              break;
            }
          Tensor first = like ? *like : Tensor();
          inputs.clear();
          for (const py::handle& a : args)
            inputs.push_back(to_tensor(a, first.defined() ? &first : nullptr));
          Attrs attrs;
          for (const auto& [key, value] : kwargs) {
            const std::string name = key.cast<std::string>();
            const AttrSpec* spec = nullptr;
            for (const AttrSpec& s : op->attrs)
              if (s.name == name) spec = &s;
            if (spec == nullptr) {
              std::string expected;
              for (const AttrSpec& s : op->attrs)
                expected += (expected.empty() ? "" : ", ") + s.name;
              throw Error(fmt::format("{}: unknown attribute \"{}\" (expected: {})", op->name, name,
                                      expected.empty() ? std::string("none") : expected));
            }
            attrs.set(name, attr_from_python(*op, *spec, value));
          }
          return detail::apply(op->kind, inputs, attrs);
        },
        signature_doc(*op).c_str());
  }
  ops.attr("__all__") = names;
}

}  // namespace kiln::python
