// kiln.cond, kiln.while_loop and kiln.scan taking Python callables (control_flow.h). Eagerly
// they are Python control flow on the predicate's value; inside a kiln.function trace the
// callables are traced once into the sub-graphs of a `cond` / `while` node (and traced again
// when a gradient re-runs them), so they must compute the same thing every time they are
// called. A callable returns a Tensor or a tuple/list of Tensors; what kiln.cond returns has the
// branches' structure, and loop variables keep the structure they were given. A Python
// exception raised by a callable propagates unchanged; the trace it interrupted is discarded.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "kiln/frontend/function/control_flow.h"

namespace kiln::python {
namespace {

// The structure of a callable's result: one Tensor, or a tuple / list of them.
enum class Structure { kTensor, kTuple, kList };

// Flattens a callable's result into tensors (numpy arrays and Python numbers become tensors).
std::vector<Tensor> flatten(const py::handle& value, const char* what, Structure* structure) {
  std::vector<Tensor> out;
  if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
    if (structure)
      *structure = py::isinstance<py::tuple>(value) ? Structure::kTuple : Structure::kList;
    for (const py::handle& v : value) out.push_back(to_tensor(v));
    return out;
  }
  if (value.is_none())
    throw py::type_error(std::string(what) +
                         " returned None; return a kiln.Tensor or a tuple or list of them");
  if (structure) *structure = Structure::kTensor;
  out.push_back(to_tensor(value));
  return out;
}

py::object unflatten(const std::vector<Tensor>& tensors, Structure structure) {
  if (structure == Structure::kTensor && tensors.size() == 1) return py::cast(tensors[0]);
  py::list l;
  for (const Tensor& t : tensors) l.append(py::cast(t));
  return structure == Structure::kList ? py::object(l) : py::object(py::tuple(l));
}

py::object call_cond(const py::handle& pred, const py::function& true_fn,
                     const py::function& false_fn) {
  Tensor p = to_tensor(pred);
  // The branches outlive this call when a gradient re-runs them later.
  auto structure = std::make_shared<Structure>(Structure::kTensor);
  auto branch = [&structure](const py::function& fn, const char* what) {
    return BranchFn([fn = SharedPyObject(fn), what, structure]() {
      py::gil_scoped_acquire gil;
      return flatten(fn.get()(), what, structure.get());
    });
  };
  std::vector<Tensor> out =
      cond(p, branch(true_fn, "kiln.cond: true_fn"), branch(false_fn, "kiln.cond: false_fn"));
  return unflatten(out, *structure);
}

// Loop variables: one Tensor (the callables see and return one) or a tuple / list of them
// (the callables get them as separate arguments, as tf.while_loop does).
py::object call_while(const py::function& cond_fn, const py::function& body_fn,
                      const py::handle& loop_vars) {
  Structure structure = Structure::kTensor;
  std::vector<Tensor> vars = flatten(loop_vars, "kiln.while_loop: loop_vars", &structure);
  auto as_args = [structure](const std::vector<Tensor>& v) {
    if (structure == Structure::kTensor) return py::make_tuple(py::cast(v.at(0)));
    py::tuple t(v.size());
    for (size_t i = 0; i < v.size(); ++i) t[i] = py::cast(v[i]);
    return t;
  };
  LoopCondFn c = [cond_fn = SharedPyObject(cond_fn), as_args](const std::vector<Tensor>& v) {
    py::gil_scoped_acquire gil;
    return to_tensor(cond_fn.get()(*as_args(v)));
  };
  LoopBodyFn b = [body_fn = SharedPyObject(body_fn), as_args](const std::vector<Tensor>& v) {
    py::gil_scoped_acquire gil;
    std::vector<Tensor> next =
        flatten(body_fn.get()(*as_args(v)), "kiln.while_loop: body_fn", nullptr);
    if (next.size() != v.size())
      throw Error("kiln.while_loop: body_fn returned " + std::to_string(next.size()) +
                  " tensors for " + std::to_string(v.size()) +
                  " loop variables; return one value per loop variable, in order");
    return next;
  };
  return unflatten(while_loop(c, b, vars), structure);
}

// Without xs: body(step, state). With xs (a Tensor or a tuple / list of [steps, ...] Tensors):
// body(step, state, rows), rows having the structure of xs (row `step` of each).
py::tuple call_scan(int64_t steps, const py::function& body_fn, const py::handle& init,
                    const py::handle& xs) {
  Structure structure = Structure::kTensor, xs_structure = Structure::kTensor;
  std::vector<Tensor> state = flatten(init, "kiln.scan: init", &structure);
  std::vector<Tensor> sequences;
  const bool with_rows = !xs.is_none();
  if (with_rows) sequences = flatten(xs, "kiln.scan: xs", &xs_structure);
  ScanRowsBodyFn b = [body_fn = SharedPyObject(body_fn), structure, xs_structure, with_rows](
                         const Tensor& step, const std::vector<Tensor>& v,
                         const std::vector<Tensor>& rows) {
    py::gil_scoped_acquire gil;
    py::object s = unflatten(v, structure);
    py::object out =
        with_rows ? body_fn.get()(step, s, unflatten(rows, xs_structure)) : body_fn.get()(step, s);
    std::vector<Tensor> next = flatten(out, "kiln.scan: body_fn", nullptr);
    if (next.size() != v.size())
      throw Error("kiln.scan: body_fn returned " + std::to_string(next.size()) +
                  " tensors for a state of " + std::to_string(v.size()) +
                  "; return the next state with the structure of init");
    return next;
  };
  ScanResult r = scan(steps, b, state, sequences);
  return py::make_tuple(unflatten(r.final_state, structure), unflatten(r.stacked, structure));
}

}  // namespace

void bind_control_flow(py::module_& m) {
  m.def("cond", &call_cond, py::arg("pred"), py::arg("true_fn"), py::arg("false_fn"),
        "Runs true_fn() if the bool scalar `pred` is true, else false_fn(); traced, one `cond` "
        "node. Both callables return a Tensor or tuples/lists of Tensors of the same types.");
  m.def("while_loop", &call_while, py::arg("cond"), py::arg("body"), py::arg("loop_vars"),
        "Repeats loop_vars = body(*loop_vars) while cond(*loop_vars) is true; traced, one "
        "`while` node. loop_vars is a Tensor or a tuple/list of Tensors that keep their types.");
  m.def("scan", &call_scan, py::arg("steps"), py::arg("body"), py::arg("init"),
        py::arg("xs") = py::none(),
        "state = body(step, state) for step in 0..steps-1 (body(step, state, rows) with xs: "
        "row `step` of each [steps, ...] tensor of xs); returns (final state, every step's "
        "state stacked along a new leading axis), like jax.lax.scan.");
}

}  // namespace kiln::python
