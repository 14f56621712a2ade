// kiln.compare_modes(fn, *args): the Python form of kiln::compare_modes
// (frontend/function/compare_modes.h). `fn` is a Python callable (or a kiln.Function, whose
// callable is used); it is traced once as a compiled kiln.function to learn its variables, then
// run eagerly (the Python body on kiln tensors) and compiled from the same starting state.
// Returns a kiln.ModeComparison; prints its report unless print=False. The function's
// variables end as they started.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "kiln/frontend/function/compare_modes.h"
#include "py_function.h"

namespace kiln::python {
namespace {

// A callable's result as the flat list of tensors compare_modes compares.
std::vector<Tensor> result_tensors(const py::object& result) {
  std::vector<Tensor> out;
  if (result.is_none()) return out;
  if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) {
    for (const py::handle& r : result) out.push_back(to_tensor(r));
    return out;
  }
  out.push_back(to_tensor(result));
  return out;
}

ModeComparison call_compare_modes(const py::object& fn_or_function, const py::args& args,
                                  const py::kwargs& kwargs, const CompareOptions& base,
                                  bool print) {
  py::function fn = py::isinstance<PyFunction>(fn_or_function)
                        ? fn_or_function.cast<PyFunction&>().callable()
                        : py::function(fn_or_function);
  CompareOptions options = base;
  options.print_to = nullptr;
  PyFunction compiled(fn, FunctionOptions{.name = options.name, .mode = ExecutionMode::kCompiled});
  ConcreteFunction cf = compiled.concrete(args, kwargs);
  FlatArguments flat = flatten_arguments(args, kwargs);
  // The eager call sees kiln tensors where the compiled one traced them (numpy arrays become
  // tensors, as the traced function's parameters are).
  py::list eager_args;
  for (size_t i = 0; i < args.size(); ++i)
    eager_args.append(flat.slots[i] >= 0 ? py::cast(flat.tensors[size_t(flat.slots[i])])
                                         : py::reinterpret_borrow<py::object>(args[i]));
  py::dict eager_kwargs;
  size_t s = args.size();
  for (const auto& [k, v] : kwargs) {
    eager_kwargs[k] = flat.slots[s] >= 0 ? py::cast(flat.tensors[size_t(flat.slots[s])])
                                         : py::reinterpret_borrow<py::object>(v);
    ++s;
  }
  py::tuple eager_tuple(eager_args);
  ModeComparison c = detail::compare_concrete(
      options, cf, flat.tensors, [&] { return result_tensors(fn(*eager_tuple, **eager_kwargs)); },
      [&] { return result_tensors(compiled.call(args, kwargs)); });
  if (print) py::print(c.to_string(), py::arg("end") = "", py::arg("flush") = true);
  return c;
}

}  // namespace

void bind_compare_modes(py::module_& m) {
  py::class_<ResultDifference>(m, "ResultDifference",
                               "How far one result of the eager and compiled runs is apart.")
      .def_readonly("name", &ResultDifference::name)
      .def_property_readonly("type", [](const ResultDifference& d) { return d.type.to_string(); })
      .def_readonly("max_abs", &ResultDifference::max_abs)
      .def_readonly("max_rel", &ResultDifference::max_rel)
      .def_readonly("nonfinite_mismatches", &ResultDifference::nonfinite_mismatches)
      .def_readonly("note", &ResultDifference::note)
      .def_readonly("eager_vs_float32", &ResultDifference::eager_vs_float32,
                    "bf16 results: the eager result's largest relative difference from the "
                    "float32 run of the same step (-1 for other results)")
      .def_readonly("compiled_vs_float32", &ResultDifference::compiled_vs_float32,
                    "bf16 results: the compiled result's largest relative difference from the "
                    "float32 run of the same step (-1 for other results)")
      .def("__repr__", [](const ResultDifference& d) {
        return "<kiln.ResultDifference " + d.name + ": max_abs " + std::to_string(d.max_abs) +
               ", max_rel " + std::to_string(d.max_rel) + ">";
      });

  py::class_<ModeComparison>(m, "ModeComparison",
                             "Eager against compiled: step times, compile time, memory and the "
                             "differences of every output and assigned variable.")
      .def_readonly("name", &ModeComparison::name)
      .def_property_readonly("eager_seconds",
                             [](const ModeComparison& c) { return c.eager.step_seconds; })
      .def_property_readonly("compiled_seconds",
                             [](const ModeComparison& c) { return c.compiled.step_seconds; })
      .def_property_readonly("eager_median",
                             [](const ModeComparison& c) { return c.eager.median(); })
      .def_property_readonly("compiled_median",
                             [](const ModeComparison& c) { return c.compiled.median(); })
      .def_property_readonly("speedup", &ModeComparison::speedup)
      .def_readonly("compile_seconds", &ModeComparison::compile_seconds)
      .def_readonly("kernels", &ModeComparison::kernels)
      .def_readonly("kernels_from_caches", &ModeComparison::kernels_from_caches)
      .def_readonly("arena_bytes", &ModeComparison::arena_bytes)
      .def_readonly("eager_peak_bytes", &ModeComparison::eager_peak_bytes)
      .def_readonly("compiled_peak_bytes", &ModeComparison::compiled_peak_bytes)
      .def_readonly("differences", &ModeComparison::differences)
      .def_readonly("eager_results", &ModeComparison::eager_results)
      .def_readonly("compiled_results", &ModeComparison::compiled_results)
      .def("__str__", &ModeComparison::to_string);

  m.def(
      "compare_modes",
      [](const py::object& fn, const py::args& args, const py::kwargs& kwargs) {
        // The options are keyword-only and taken out of kwargs before the function's own.
        CompareOptions options;
        bool print = true;
        py::dict fn_kwargs;
        for (const auto& [k, v] : kwargs) {
          std::string key = k.cast<std::string>();
          if (key == "warmup")
            options.warmup = v.cast<int>();
          else if (key == "steps")
            options.steps = v.cast<int>();
          else if (key == "name")
            options.name = v.cast<std::string>();
          else if (key == "print")
            print = v.cast<bool>();
          else
            fn_kwargs[k] = v;
        }
        return call_compare_modes(fn, args, py::kwargs(fn_kwargs), options, print);
      },
      py::arg("fn"),
      "compare_modes(fn, *args, warmup=2, steps=20, name='compare_modes', print=True, **kwargs): "
      "runs fn eagerly and compiled from the same state; returns a kiln.ModeComparison.");
}

}  // namespace kiln::python
