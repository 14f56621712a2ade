// kiln.function: tf.function for Python callables. The callable runs once per signature (the
// dtypes and shapes of its tensor arguments plus the other arguments' values) on traced
// tensors; later calls with a known signature run the traced graph (JIT-compiled by default)
// with the GIL released. Tensor arguments are kiln.Tensor or numpy arrays; other arguments
// (numbers, strings, bools, None) are part of the signature (a new value traces again). The
// callable returns a Tensor, a tuple or list of Tensors, or None. An exception raised by the
// callable propagates unchanged and leaves no trace behind.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings.h"
#include "kiln/frontend/function/compiled_form.h"
#include "kiln/frontend/function/function.h"
#include "kiln/frontend/function/report.h"
#include "numpy_interop.h"
#include "py_function.h"

namespace kiln::python {

namespace {

std::string label_text(size_t index) { return std::to_string(index); }
const std::string& label_text(const std::string& name) { return name; }

}  // namespace

FlatArguments flatten_arguments(const py::args& args, const py::kwargs& kwargs) {
  FlatArguments flat;
  auto add = [&](const py::handle& v, const auto& label) {
    // Positional arguments hash their index, keyword arguments their name.
    if constexpr (std::is_integral_v<std::decay_t<decltype(label)>>)
      detail::hash_combine(flat.static_hash, uint64_t(label) + 1);
    else
      detail::hash_combine(flat.static_hash, std::hash<std::string>()(label) | (1ull << 63));
    if (py::isinstance<Tensor>(v) || py::isinstance<py::array>(v) || is_numpy_scalar(v)) {
      flat.slots.push_back(int(flat.tensors.size()));
      flat.tensors.push_back(to_tensor(v));
      return;
    }
    if (py::isinstance<Variable>(v)) {
      // Captured by the trace, so part of the signature by identity.
      flat.slots.push_back(-1);
      detail::hash_combine(flat.static_hash,
                           std::hash<const void*>()(v.cast<Variable>().handle_id()));
      return;
    }
    if (!(v.is_none() || py::isinstance<py::bool_>(v) || py::isinstance<py::int_>(v) ||
          py::isinstance<py::float_>(v) || py::isinstance<py::str>(v)))
      throw py::type_error("kiln.function: argument " + label_text(label) + " is a " +
                           std::string(py::str(py::type::of(v).attr("__name__"))) +
                           "; pass kiln.Tensor, numpy arrays or numpy scalars (traced), or None, "
                           "bool, int, float or str "
                           "(part of the signature)");
    flat.slots.push_back(-1);
    detail::hash_combine(flat.static_hash, std::hash<std::string>()(std::string(py::repr(v))));
  };
  flat.slots.reserve(args.size() + kwargs.size());
  flat.tensors.reserve(args.size() + kwargs.size());
  for (size_t i = 0; i < args.size(); ++i) add(args[i], i);
  for (const auto& [k, v] : kwargs) add(v, k.cast<std::string>());
  return flat;
}

PyFunction::PyFunction(py::function fn, FunctionOptions options)
    : fn_(std::move(fn)), core_(std::make_shared<detail::FunctionCore>(std::move(options))) {}

py::object PyFunction::call(const py::args& args, const py::kwargs& kwargs) {
  FlatArguments flat = flatten_arguments(args, kwargs);
  CallSite site{this, &args, &kwargs, &flat};
  detail::FunctionCore::Body body = make_body(site);
  std::vector<Tensor> out;
  {
    py::gil_scoped_release release;  // the body takes the GIL back when it traces
    out = core_->call(flat.tensors, flat.static_hash, body);
  }
  return unflatten(flat.static_hash, std::move(out));
}

double PyFunction::time_cpp_calls(int calls, const py::args& args, const py::kwargs& kwargs) {
  if (calls < 1) throw Error("time_cpp_calls: calls must be >= 1, got " + std::to_string(calls));
  FlatArguments flat = flatten_arguments(args, kwargs);
  CallSite site{this, &args, &kwargs, &flat};
  detail::FunctionCore::Body body = make_body(site);
  py::gil_scoped_release release;
  core_->call(flat.tensors, flat.static_hash, body);  // traced and compiled before the clock
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    // What kiln::function's call operator does for a call with these tensors.
    std::vector<Tensor> tensors = flat.tensors;
    std::vector<Tensor> out = core_->call(tensors, flat.static_hash, body);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
}

ConcreteFunction PyFunction::concrete(const py::args& args, const py::kwargs& kwargs) {
  FlatArguments flat = flatten_arguments(args, kwargs);
  CallSite site{this, &args, &kwargs, &flat};
  detail::FunctionCore::Body body = make_body(site);
  py::gil_scoped_release release;
  return core_->concrete(flat.tensors, flat.static_hash, body);
}

detail::FunctionCore::Body PyFunction::make_body(const CallSite& site) {
  // Runs the Python callable on traced tensors (under the GIL) and flattens its result. The
  // body is only called during the call that made it, so it refers to the call's arguments
  // (one pointer: std::function keeps it without allocating on every call).
  return [site = &site](const std::vector<Tensor>& traced) {
    const std::vector<int>& slots = site->flat->slots;
    const uint64_t key = site->flat->static_hash;
    const py::args& call_args = *site->args;
    const py::kwargs& call_kwargs = *site->kwargs;
    const py::function& fn = site->self->fn_;
    Kinds* kinds = site->self->kinds_.get();
    py::gil_scoped_acquire gil;
    py::list positional;
    size_t s = 0;
    for (const py::handle& a : call_args) {
      positional.append(slots[s] >= 0 ? py::cast(traced[size_t(slots[s])])
                                      : py::reinterpret_borrow<py::object>(a));
      ++s;
    }
    py::dict named;
    for (const auto& [k, v] : call_kwargs) {
      named[k] = slots[s] >= 0 ? py::cast(traced[size_t(slots[s])])
                               : py::reinterpret_borrow<py::object>(v);
      ++s;
    }
    py::object result = fn(*py::tuple(positional), **named);
    std::vector<Tensor> out;
    ResultKind kind;
    if (result.is_none()) {
      kind = ResultKind::kNone;
    } else if (py::isinstance<Tensor>(result)) {
      kind = ResultKind::kTensor;
      out.push_back(result.cast<Tensor>());
    } else if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) {
      kind = py::isinstance<py::tuple>(result) ? ResultKind::kTuple : ResultKind::kList;
      for (const py::handle& r : result) {
        if (!py::isinstance<Tensor>(r))
          throw py::type_error("kiln.function: the function returned a sequence holding a " +
                               std::string(py::str(py::type::of(r).attr("__name__"))) +
                               "; return kiln.Tensor values only");
        out.push_back(r.cast<Tensor>());
      }
    } else {
      throw py::type_error("kiln.function: the function returned a " +
                           std::string(py::str(py::type::of(result).attr("__name__"))) +
                           "; return a kiln.Tensor, a tuple or list of them, or None");
    }
    std::lock_guard<std::mutex> lock(kinds->mutex);
    kinds->by_signature[{key, out.size()}] = kind;
    return out;
  };
}

py::object PyFunction::unflatten(uint64_t key, std::vector<Tensor> out) {
  ResultKind kind = ResultKind::kTuple;
  {
    std::lock_guard<std::mutex> lock(kinds_->mutex);
    auto it = kinds_->by_signature.find({key, out.size()});
    if (it != kinds_->by_signature.end()) kind = it->second;
  }
  if (kind == ResultKind::kNone) return py::none();
  if (kind == ResultKind::kTensor && out.size() == 1) return py::cast(out[0]);
  py::list l;
  for (Tensor& t : out) l.append(py::cast(std::move(t)));
  return kind == ResultKind::kList ? py::object(l) : py::object(py::tuple(l));
}

namespace {

ExecutionMode parse_mode(const std::string& mode) {
  if (mode == "compiled") return ExecutionMode::kCompiled;
  if (mode == "reference") return ExecutionMode::kReference;
  throw Error("kiln.function: mode must be \"compiled\" or \"reference\", got \"" + mode + "\"");
}

py::list types_list(const std::vector<TensorType>& types) {
  py::list out;
  for (const TensorType& t : types) out.append(t.to_string());
  return out;
}

}  // namespace

void bind_function(py::module_& m) {
  py::class_<TensorSpec>(m, "TensorSpec", "A tensor's shape (None: any size) and dtype.")
      .def(py::init([](const py::sequence& shape, const py::object& dtype) {
             TensorSpec spec;
             for (const py::handle& d : shape)
               spec.shape.push_back(d.is_none() ? kUnknownDim : d.cast<int64_t>());
             spec.dtype = dtype_from_python(dtype);
             return spec;
           }),
           py::arg("shape"), py::arg("dtype") = "float32")
      .def("__repr__",
           [](const TensorSpec& s) { return "kiln.TensorSpec(" + s.type().to_string() + ")"; });

  py::class_<ConcreteFunction>(m, "ConcreteFunction", "One traced graph of a kiln.function.")
      .def_property_readonly("name", &ConcreteFunction::name)
      .def_property_readonly("input_types",
                             [](const ConcreteFunction& f) { return types_list(f.input_types()); })
      .def_property_readonly("output_types",
                             [](const ConcreteFunction& f) { return types_list(f.output_types()); })
      .def(
          "ir",
          [](const ConcreteFunction& f, const std::string& stage) {
            return f.ir_text(parse_stage(stage));
          },
          py::arg("stage") = "traced",
          "The IR text of the traced graph, or of the \"specialized\" or \"optimized\" stage.")
      .def(
          "memory_plan",
          [](const ConcreteFunction& f) { return f.compiled_form().memory_plan_text(); },
          "The compiled form's memory plan (needs a signature without unknown dimensions).")
      .def(
          "report",
          [](const ConcreteFunction& f, const std::string& path,
             std::optional<std::vector<py::object>> args, int calls) {
            if (!args) {
              CompiledForm form = f.compiled_form();
              py::gil_scoped_release release;
              form.write_report(path);
              return;
            }
            std::vector<Tensor> in;
            for (const py::object& a : *args) in.push_back(to_tensor(a));
            py::gil_scoped_release release;
            write_report(f, in, path, calls);
          },
          py::arg("path"), py::arg("args") = py::none(), py::arg("calls") = 5,
          "Writes the step report (one self-contained HTML page: the optimized graph by fusion "
          "group and layer, the memory plan, the kernels; docs/debugging.md). With `args`, the "
          "function runs once plus `calls` times on them under the profiler (its variables are "
          "put back afterwards) and the page shows each step's time; without, nothing runs (the "
          "signature must have no unknown dimension).")
      .def("__call__",
           [](const ConcreteFunction& f, const py::args& args) {
             std::vector<Tensor> in;
             for (const py::handle& a : args) in.push_back(to_tensor(a));
             std::vector<Tensor> out;
             {
               py::gil_scoped_release release;
               out = f(in);
             }
             return out;
           })
      .def(
          "run",
          [](const ConcreteFunction& f, const std::vector<Tensor>& args, const std::string& mode) {
            py::gil_scoped_release release;
            return f.run(args, parse_mode(mode));
          },
          py::arg("args"), py::arg("mode"));

  py::class_<PyFunction>(m, "Function", "A traced Python callable (see kiln.function).")
      .def("__call__", &PyFunction::call)
      .def("concrete", &PyFunction::concrete,
           "The concrete function these arguments select (traced if needed).")
      .def_property_readonly("tracing_count",
                             [](PyFunction& f) { return f.core().tracing_count(); })
      .def_property_readonly("name", [](PyFunction& f) { return f.core().name(); })
      .def("_time_cpp_calls", &PyFunction::time_cpp_calls, py::arg("calls"),
           "Benchmark support (bench/python_call_overhead.py): seconds per call of this "
           "function made `calls` times from C++ on these arguments, as a C++ caller of "
           "kiln::function makes them (signature lookup, run, results), the GIL released.");

  m.def(
      "_function",
      [](py::function fn, std::optional<std::vector<TensorSpec>> input_signature,
         bool reduce_retracing, std::optional<std::string> name, std::optional<std::string> mode) {
        FunctionOptions options;
        options.name = name ? *name : std::string(py::str(fn.attr("__name__")));
        options.input_signature = std::move(input_signature);
        options.reduce_retracing = reduce_retracing;
        if (mode) options.mode = parse_mode(*mode);
        return PyFunction(std::move(fn), std::move(options));
      },
      py::arg("fn"), py::arg("input_signature") = py::none(), py::arg("reduce_retracing") = false,
      py::arg("name") = py::none(), py::arg("mode") = py::none());
}

}  // namespace kiln::python
