// Models from Python: kiln::ModelImpl (_Model, with the PyLayer trampoline for Python
// subclasses), SequentialImpl (_Sequential) and FunctionalImpl (_Functional); compile, fit,
// evaluate, predict (numpy in, numpy out), summary, save / load_model, save_weights /
// load_weights. The loops run in C++ with the GIL released; Python layers, losses and
// callbacks take it back when C++ calls them (at trace time for layers and losses, at each
// hook for callbacks).
#include <pybind11/iostream.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "keras_bindings.h"
#include "kiln/keras/models/functional.h"
#include "kiln/keras/models/sequential.h"
#include "kiln/keras/saving/saving.h"
#include "kiln/keras/training/callback.h"
#include "kiln/keras/training/compile_options.h"
#include "numpy_interop.h"

namespace kiln::python {

// keras_training_py.cc: compile's arguments and the callbacks list.
Optimizer optimizer_from_py(const py::handle& value);
LossSpec loss_spec_from_py(const py::handle& value);
MetricSpec metric_spec_from_py(const py::handle& value);
std::vector<CallbackPtr> callbacks_from_py(const py::handle& value);
LayerFactory python_layer_factory(py::object cls);

namespace {

using PyModelImpl = PyLayer<ModelImpl>;

// The Python caller's file and line outside the kiln package (kiln.keras._base.user_frame).
ir::SourceLocation python_caller() {
  py::object frame = py::module_::import("kiln.keras._base").attr("user_frame")();
  if (frame.is_none()) return {};
  auto [file, line] = frame.cast<std::pair<std::string, uint32_t>>();
  return {std::move(file), line, 0};
}

// While alive, std::cout (the progress bar, verbose logs) goes to Python's sys.stdout, so it
// shows in notebooks and is captured as Python output; each flush takes the GIL. Make it
// before releasing the GIL (it is then destroyed after the GIL is back).
struct ToPythonStdout {
  ToPythonStdout() {
    py::object out = py::module_::import("sys").attr("stdout");
    if (!out.is_none()) redirect.emplace(std::cout, out);  // None: pythonw, no console
  }
  std::optional<py::scoped_ostream_redirect> redirect;
};

// Ctrl-C during fit / evaluate / predict: after each batch, runs Python's signal handlers
// (the loops run in C++ with the GIL released, where Python cannot); a KeyboardInterrupt (or
// another exception a handler raises) ends the loop and propagates.
class PythonSignals : public Callback {
 public:
  void on_train_batch_end(int, const Logs&) override { check(); }
  void on_test_batch_end(int, const Logs&) override { check(); }
  void on_predict_batch_end(int, const Logs&) override { check(); }

 private:
  static void check() {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
};

std::vector<CallbackPtr> with_signal_checks(std::vector<CallbackPtr> callbacks) {
  callbacks.push_back(std::make_shared<PythonSignals>());
  return callbacks;
}

py::object numpy_or_list(std::vector<Tensor> outputs, bool single) {
  if (single) return numpy_view(outputs.at(0));
  py::list l;
  for (const Tensor& t : outputs) l.append(numpy_view(t));
  return l;
}

LossWeights loss_weights_from_py(const py::handle& value) {
  if (value.is_none()) return {};
  if (py::isinstance<py::dict>(value)) {
    std::map<std::string, double> by_name;
    for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(value))
      by_name[k.cast<std::string>()] = v.cast<double>();
    return LossWeights::by_output(std::move(by_name));
  }
  return LossWeights(value.cast<std::vector<double>>());
}

ClassWeight class_weight_from_py(const py::handle& value) {
  if (value.is_none()) return {};
  std::map<int64_t, double> w;
  for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(value))
    w[k.cast<int64_t>()] = v.cast<double>();
  return ClassWeight(std::move(w));
}

}  // namespace

void bind_keras_models(py::module_& m) {
  py::class_<ModelImpl, LayerImpl, PyModelImpl, std::shared_ptr<ModelImpl>> model(
      m, "_Model", py::dynamic_attr(), "kiln::ModelImpl: the base of kiln.keras.Model.");
  model.def(py::init_alias<std::string, std::string>(), py::arg("class_name") = "Model",
            py::arg("name") = "");
  model.def(
      "compile",
      [](ModelImpl& self, const py::handle& optimizer, const py::handle& loss,
         const py::handle& metrics, const py::handle& loss_weights,
         const py::handle& weighted_metrics, bool run_eagerly) {
        CompileOptions o;
        o.optimizer = optimizer_from_py(optimizer);
        o.loss = loss_spec_from_py(loss);
        o.metrics = metric_spec_from_py(metrics);
        o.weighted_metrics = metric_spec_from_py(weighted_metrics);
        o.loss_weights = loss_weights_from_py(loss_weights);
        o.run_eagerly = run_eagerly;
        self.compile(std::move(o));
        self.set_compile_origin(python_caller());
      },
      py::arg("optimizer") = "rmsprop", py::arg("loss") = py::none(),
      py::arg("metrics") = py::none(), py::arg("loss_weights") = py::none(),
      py::arg("weighted_metrics") = py::none(), py::arg("run_eagerly") = false);
  model.def_property_readonly("compiled", &ModelImpl::compiled);
  model.def_property_readonly("optimizer", [](const ModelImpl& self) -> py::object {
    if (!self.compiled()) return py::none();
    return py::cast(self.compile_options().optimizer);
  });
  model.def_property(
      "stop_training", [](const ModelImpl& self) { return self.stop_training; },
      [](ModelImpl& self, bool v) { self.stop_training = v; });
  model.def(
      "fit",
      [](ModelImpl& self, const py::handle& x, const py::handle& y,
         std::optional<int64_t> batch_size, int epochs, int verbose, const py::handle& callbacks,
         double validation_split, const py::handle& validation_data, bool shuffle,
         const py::handle& sample_weight, const py::handle& class_weight, int initial_epoch,
         uint64_t seed, std::optional<int64_t> steps_per_epoch) {
        FitOptions o;
        o.steps_per_epoch = steps_per_epoch.value_or(-1);
        o.epochs = epochs;
        o.verbose = verbose;
        o.callbacks = with_signal_checks(callbacks_from_py(callbacks));
        o.validation_split = validation_split;
        if (!validation_data.is_none()) {
          py::tuple v = validation_data.cast<py::tuple>();
          if (v.size() != 2 && v.size() != 3)
            throw Error("fit: validation_data should be (x, y) or (x, y, sample_weight), got " +
                        std::to_string(v.size()) + " items");
          o.validation_data = ValidationData(to_arrays(v[0]), to_arrays(v[1]),
                                             v.size() == 3 ? to_arrays(v[2]) : Arrays());
        }
        o.shuffle = shuffle;
        o.sample_weight = to_arrays(sample_weight);
        o.class_weight = class_weight_from_py(class_weight);
        o.initial_epoch = initial_epoch;
        o.seed = seed;
        Arrays xs = to_arrays(x), ys = to_arrays(y);
        // Keras: without batch_size, steps_per_epoch batches make one pass over the training
        // examples (those validation_split leaves), else 32.
        o.batch_size = batch_size.value_or(32);
        if (!batch_size && o.steps_per_epoch >= 1 && !xs.empty()) {
          const int64_t n = xs.num_examples("fit: x");
          const int64_t n_train = n - int64_t(double(n) * validation_split);
          o.batch_size =
              std::max<int64_t>(1, (n_train + o.steps_per_epoch - 1) / o.steps_per_epoch);
        }
        ToPythonStdout out;
        py::gil_scoped_release release;
        return self.fit(xs, ys, std::move(o));
      },
      py::arg("x"), py::arg("y") = py::none(), py::arg("batch_size") = py::none(),
      py::arg("epochs") = 1, py::arg("verbose") = 1, py::arg("callbacks") = py::none(),
      py::arg("validation_split") = 0.0, py::arg("validation_data") = py::none(),
      py::arg("shuffle") = true, py::arg("sample_weight") = py::none(),
      py::arg("class_weight") = py::none(), py::arg("initial_epoch") = 0, py::arg("seed") = 0,
      py::arg("steps_per_epoch") = py::none());
  model.def(
      "evaluate",
      [](ModelImpl& self, const py::handle& x, const py::handle& y, int64_t batch_size, int verbose,
         const py::handle& sample_weight, const py::handle& callbacks,
         bool return_dict) -> py::object {
        EvaluateOptions o;
        o.batch_size = batch_size;
        o.verbose = verbose;
        o.sample_weight = to_arrays(sample_weight);
        o.callbacks = with_signal_checks(callbacks_from_py(callbacks));
        Arrays xs = to_arrays(x), ys = to_arrays(y);
        Logs logs;
        {
          ToPythonStdout out;
          py::gil_scoped_release release;
          logs = self.evaluate(xs, ys, std::move(o));
        }
        if (return_dict) return py::cast(logs);
        // Keras: the values in the model's log order (loss, output losses, metrics in compile
        // order), then any others by name; one number when alone.
        const std::vector<std::string> order = self.log_keys();
        py::list values;
        for (const std::string& k : order)
          if (logs.count(k)) values.append(logs[k]);
        for (const auto& [k, v] : logs)
          if (std::find(order.begin(), order.end(), k) == order.end()) values.append(v);
        return values.size() == 1 ? py::object(values[0]) : py::object(values);
      },
      py::arg("x"), py::arg("y") = py::none(), py::arg("batch_size") = 32, py::arg("verbose") = 1,
      py::arg("sample_weight") = py::none(), py::arg("callbacks") = py::none(),
      py::arg("return_dict") = false);
  model.def(
      "predict",
      [](ModelImpl& self, const py::handle& x, int64_t batch_size, int verbose,
         const py::handle& callbacks) {
        PredictOptions o;
        o.batch_size = batch_size;
        o.verbose = verbose;
        o.callbacks = with_signal_checks(callbacks_from_py(callbacks));
        Arrays xs = to_arrays(x);
        std::vector<Tensor> out;
        {
          ToPythonStdout to_python;
          py::gil_scoped_release release;
          out = self.predict_outputs(xs, std::move(o));
        }
        return numpy_or_list(std::move(out), out.size() == 1);
      },
      py::arg("x"), py::arg("batch_size") = 32, py::arg("verbose") = 0,
      py::arg("callbacks") = py::none());
  model.def(
      "train_on_batch",
      [](ModelImpl& self, const py::handle& x, const py::handle& y, const py::handle& sample_weight,
         const py::handle& class_weight) {
        Arrays xs = to_arrays(x), ys = to_arrays(y), ws = to_arrays(sample_weight);
        ClassWeight cw = class_weight_from_py(class_weight);
        py::gil_scoped_release release;
        return self.train_on_batch(xs, ys, ws, cw);
      },
      py::arg("x"), py::arg("y") = py::none(), py::arg("sample_weight") = py::none(),
      py::arg("class_weight") = py::none(),
      "One training step on one batch; returns the logs (a dict; kiln.keras.Model's "
      "train_on_batch returns them as Keras does).");
  model.def(
      "test_on_batch",
      [](ModelImpl& self, const py::handle& x, const py::handle& y,
         const py::handle& sample_weight) {
        Arrays xs = to_arrays(x), ys = to_arrays(y), ws = to_arrays(sample_weight);
        py::gil_scoped_release release;
        return self.test_on_batch(xs, ys, ws);
      },
      py::arg("x"), py::arg("y") = py::none(), py::arg("sample_weight") = py::none());
  model.def("_log_keys", &ModelImpl::log_keys,
            "The keys of the train/test logs in Keras' order (loss, output losses, metrics "
            "in compile order).");
  model.def("summary_string", &ModelImpl::summary_string, py::arg("line_length") = 0);
  model.def_property_readonly("layers", [](const ModelImpl& self) {
    py::list out;
    for (const Layer& l : self.layers()) out.append(py::cast(l.ptr()));
    return out;
  });
  model.def_property_readonly("input_names", &ModelImpl::input_names);
  model.def_property_readonly("output_names", &ModelImpl::output_names);
  model.def(
      "save",
      [](const ModelImpl& self, const std::string& path, bool overwrite, bool include_optimizer) {
        py::gil_scoped_release release;  // Python layers' get_config take the GIL back
        self.save(path, {.overwrite = overwrite, .include_optimizer = include_optimizer});
      },
      py::arg("filepath"), py::arg("overwrite") = true, py::arg("include_optimizer") = true);
  model.def("save_weights", &ModelImpl::save_weights, py::arg("filepath"));
  model.def("load_weights", &ModelImpl::load_weights, py::arg("filepath"));
  model.def(
      "train_step_ir",
      [](ModelImpl& self, const py::handle& x, const py::handle& y, const std::string& stage) {
        return self.train_step_function(to_arrays(x), to_arrays(y)).ir_text(parse_stage(stage));
      },
      py::arg("x"), py::arg("y"), py::arg("stage") = "optimized",
      "The IR of the compiled training step for a batch like (x, y): \"traced\", "
      "\"specialized\" or \"optimized\".");

  py::class_<SequentialImpl, ModelImpl, std::shared_ptr<SequentialImpl>>(
      m, "_Sequential", py::dynamic_attr(), "kiln::SequentialImpl")
      .def(py::init(
               [](const py::list& layers, const py::object& input_shape, const std::string& name) {
                 std::vector<Layer> ls;
                 for (const py::handle& l : layers) ls.push_back(to_layer(l));
                 std::optional<Shape> shape;
                 if (!input_shape.is_none()) shape = shape_from_py(input_shape);
                 return std::make_shared<SequentialImpl>(std::move(ls), shape, name);
               }),
           py::arg("layers"), py::arg("input_shape") = py::none(), py::arg("name") = "")
      .def(
          "add", [](SequentialImpl& self, const py::handle& l) { self.add(to_layer(l)); },
          py::arg("layer"));

  py::class_<FunctionalImpl, ModelImpl, std::shared_ptr<FunctionalImpl>>(
      m, "_Functional", py::dynamic_attr(), "kiln::FunctionalImpl")
      .def(py::init(
               [](const py::handle& inputs, const py::handle& outputs, const std::string& name) {
                 auto tensors = [](const py::handle& v) {
                   std::vector<Tensor> out;
                   if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
                     for (const py::handle& t : v) out.push_back(t.cast<Tensor>());
                   } else {
                     out.push_back(v.cast<Tensor>());
                   }
                   return out;
                 };
                 return std::make_shared<FunctionalImpl>(tensors(inputs), tensors(outputs), name);
               }),
           py::arg("inputs"), py::arg("outputs"), py::arg("name") = "")
      .def_property_readonly("inputs", &FunctionalImpl::inputs)
      .def_property_readonly("outputs", &FunctionalImpl::outputs);

  m.def(
      "_load_model",
      [](const std::string& path, const py::handle& custom_objects, bool compile) {
        LoadOptions o;
        o.compile = compile;
        if (!custom_objects.is_none())
          for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(custom_objects))
            o.custom_objects[k.cast<std::string>()] =
                python_layer_factory(py::reinterpret_borrow<py::object>(v));
        Model loaded;
        {
          py::gil_scoped_release release;
          loaded = load_model(path, o);
        }
        return std::static_pointer_cast<ModelImpl>(loaded.ptr());
      },
      py::arg("filepath"), py::arg("custom_objects") = py::none(), py::arg("compile") = true);
}

}  // namespace kiln::python
