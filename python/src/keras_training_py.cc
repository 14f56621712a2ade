// Losses, optimizers (with learning-rate schedules), metrics and callbacks from Python, and
// the conversions compile / fit use (strings, objects, Python callables, lists and dicts).
// Python callables (a loss function, a schedule, a custom layer class given to load_model)
// are held through SharedPyObject (bindings.h): copies of the C++ objects made while the GIL
// is released never touch Python reference counts.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "keras_bindings.h"
#include "kiln/keras/data/dataset.h"
#include "kiln/keras/data/digits.h"
#include "kiln/keras/saving/from_config.h"
#include "kiln/keras/training/callbacks.h"
#include "kiln/keras/training/compile_options.h"
#include "kiln/keras/training/lr_callbacks.h"
#include "numpy_interop.h"

namespace kiln::python {
namespace {

std::string type_name(const py::handle& v) {
  return std::string(py::str(py::type::of(v).attr("__name__")));
}

// Callback hooks overridden in Python (kiln.keras.callbacks.Callback subclasses).
class PyCallback : public Callback {
 public:
  using Callback::Callback;
#define KILN_PY_HOOK(hook) \
  void hook(const Logs& logs) override { PYBIND11_OVERRIDE(void, Callback, hook, logs); }
#define KILN_PY_INDEXED_HOOK(hook) \
  void hook(int i, const Logs& logs) override { PYBIND11_OVERRIDE(void, Callback, hook, i, logs); }
  KILN_PY_HOOK(on_train_begin)
  KILN_PY_HOOK(on_train_end)
  KILN_PY_INDEXED_HOOK(on_epoch_begin)
  KILN_PY_INDEXED_HOOK(on_epoch_end)
  KILN_PY_INDEXED_HOOK(on_train_batch_begin)
  KILN_PY_INDEXED_HOOK(on_train_batch_end)
  KILN_PY_HOOK(on_test_begin)
  KILN_PY_HOOK(on_test_end)
  KILN_PY_INDEXED_HOOK(on_test_batch_begin)
  KILN_PY_INDEXED_HOOK(on_test_batch_end)
  KILN_PY_HOOK(on_predict_begin)
  KILN_PY_HOOK(on_predict_end)
  KILN_PY_INDEXED_HOOK(on_predict_batch_begin)
  KILN_PY_INDEXED_HOOK(on_predict_batch_end)
#undef KILN_PY_HOOK
#undef KILN_PY_INDEXED_HOOK
};

MonitorMode monitor_mode(const std::string& mode) {
  if (mode == "auto") return MonitorMode::kAuto;
  if (mode == "min") return MonitorMode::kMin;
  if (mode == "max") return MonitorMode::kMax;
  throw Error("callback mode must be \"auto\", \"min\" or \"max\", got \"" + mode + "\"");
}

// A loss written in Python: fn(y_true, y_pred) -> per-sample values (Keras' convention), run
// while a step is traced (or at every step with run_eagerly).
Loss python_loss(const py::handle& fn) {
  SharedPyObject f(py::reinterpret_borrow<py::object>(fn));
  std::string name =
      py::hasattr(fn, "__name__") ? fn.attr("__name__").cast<std::string>() : type_name(fn);
  return Loss::per_sample(name, [f](const Tensor& y_true, const Tensor& y_pred) {
    py::gil_scoped_acquire gil;
    return to_tensor(f.get()(y_true, y_pred));
  });
}

Loss loss_from_py(const py::handle& v) {
  if (py::isinstance<Loss>(v)) return v.cast<Loss>();
  if (py::isinstance<py::str>(v)) return Loss(v.cast<std::string>());
  if (PyCallable_Check(v.ptr())) return python_loss(v);
  throw py::type_error(
      "compile: a loss is a name, a kiln.keras.losses object or a function "
      "(y_true, y_pred) -> per-sample losses; got " +
      type_name(v));
}

Metric metric_from_py(const py::handle& v) {
  if (py::isinstance<Metric>(v)) return v.cast<Metric>();
  if (py::isinstance<py::str>(v)) return Metric(v.cast<std::string>());
  throw py::type_error("compile: a metric is a name or a kiln.keras.metrics object; got " +
                       type_name(v));
}

std::vector<Metric> metric_list(const py::handle& v) {
  std::vector<Metric> out;
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    for (const py::handle& m : v) out.push_back(metric_from_py(m));
  } else {
    out.push_back(metric_from_py(v));
  }
  return out;
}

// A schedule: a LearningRateSchedule object or a Python callable step -> rate (a float64
// scalar kiln.Tensor step in, a Tensor or number out), traced into the training step.
LearningRateSchedule schedule_from_py(const py::handle& v) {
  if (py::isinstance<LearningRateSchedule>(v)) return v.cast<LearningRateSchedule>();
  SharedPyObject f(py::reinterpret_borrow<py::object>(v));
  return LearningRateSchedule([f](const Tensor& step) {
    py::gil_scoped_acquire gil;
    py::object r = f.get()(step);
    return to_tensor(r, &step);
  });
}

}  // namespace

Optimizer optimizer_from_py(const py::handle& value) {
  if (py::isinstance<Optimizer>(value)) return value.cast<Optimizer>();
  if (py::isinstance<py::str>(value)) return Optimizer(value.cast<std::string>());
  throw py::type_error(
      "compile: optimizer is a name (\"adam\") or a kiln.keras.optimizers "
      "object; got " +
      type_name(value));
}

LossSpec loss_spec_from_py(const py::handle& value) {
  if (value.is_none()) return {};
  if (py::isinstance<py::dict>(value)) {
    std::map<std::string, Loss> by_name;
    for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(value))
      by_name[k.cast<std::string>()] = loss_from_py(v);
    return LossSpec::by_output(std::move(by_name));
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::vector<Loss> list;
    for (const py::handle& v : value) list.push_back(loss_from_py(v));
    return LossSpec(std::move(list));
  }
  return LossSpec(loss_from_py(value));
}

MetricSpec metric_spec_from_py(const py::handle& value) {
  if (value.is_none()) return {};
  if (py::isinstance<py::dict>(value)) {
    std::map<std::string, std::vector<Metric>> by_name;
    for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(value))
      by_name[k.cast<std::string>()] = metric_list(v);
    return MetricSpec::by_output(std::move(by_name));
  }
  bool nested = false;
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value))
    for (const py::handle& v : value)
      nested = nested || py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v);
  if (nested) {
    std::vector<std::vector<Metric>> lists;
    for (const py::handle& v : value) lists.push_back(metric_list(v));
    return MetricSpec::per_output(std::move(lists));
  }
  return MetricSpec(metric_list(value));
}

std::vector<CallbackPtr> callbacks_from_py(const py::handle& value) {
  std::vector<CallbackPtr> out;
  if (value.is_none()) return out;
  for (const py::handle& c : value) {
    if (!py::isinstance<Callback>(c))
      throw py::type_error("callbacks: expected kiln.keras.callbacks.Callback objects, got " +
                           type_name(c));
    out.push_back(c.cast<CallbackPtr>());
  }
  return out;
}

LayerFactory python_layer_factory(py::object cls) {
  SharedPyObject c(std::move(cls));
  return [c](const Json& config) {
    py::gil_scoped_acquire gil;
    py::object layer = c.get().attr("from_config")(from_json(config));
    return to_layer(layer);
  };
}

void bind_keras_training(py::module_& m) {
  // ---- losses ----
  py::class_<Loss>(m, "Loss", "A loss (kiln::Loss): loss(y_true, y_pred, sample_weight=None).")
      .def(py::init([](const std::string& name) { return Loss(name); }), py::arg("name"))
      .def_property_readonly("name", &Loss::name)
      .def_property_readonly("from_logits", &Loss::from_logits)
      .def(
          "__call__",
          [](const Loss& l, const py::handle& y_true, const py::handle& y_pred,
             const py::handle& sample_weight) {
            Tensor p = to_tensor(y_pred);
            return l(to_tensor(y_true, &p), p,
                     sample_weight.is_none() ? Tensor() : to_tensor(sample_weight, &p));
          },
          py::arg("y_true"), py::arg("y_pred"), py::arg("sample_weight") = py::none())
      .def("__repr__", [](const Loss& l) { return "<kiln.keras loss " + l.name() + ">"; });
  py::module_ losses = m.def_submodule("_losses");
  losses.def("mean_squared_error", &losses::mean_squared_error);
  losses.def("mean_absolute_error", &losses::mean_absolute_error);
  losses.def("binary_crossentropy", &losses::binary_crossentropy, py::arg("from_logits") = false);
  losses.def("categorical_crossentropy", &losses::categorical_crossentropy,
             py::arg("from_logits") = false);
  losses.def("sparse_categorical_crossentropy", &losses::sparse_categorical_crossentropy,
             py::arg("from_logits") = false, py::arg("ignore_class") = py::none());

  // ---- optimizers ----
  py::class_<LearningRateSchedule>(m, "LearningRateSchedule",
                                   "A learning rate as a function of the step.")
      .def("__call__", [](const LearningRateSchedule& s, int64_t step) { return s(step); })
      .def("get_config", [](const LearningRateSchedule& s) -> py::object {
        return s.config() ? from_json(*s.config()) : py::none();
      });
  m.def("_exponential_decay", &schedules::exponential_decay, py::arg("initial_learning_rate"),
        py::arg("decay_steps"), py::arg("decay_rate"), py::arg("staircase") = false);

  py::class_<Optimizer>(m, "Optimizer", "An optimizer (kiln::Optimizer; copies share state).")
      .def(py::init([](const std::string& name) { return Optimizer(name); }), py::arg("name"))
      .def_property_readonly("name", [](const Optimizer& o) { return o->name(); })
      .def(
          "_note_origin",
          [](const Optimizer& o, std::string file, uint32_t line) {
            o->note_origin({std::move(file), line, 0});
          },
          py::arg("file"), py::arg("line"),
          "Where the user's Python code made the optimizer (OptimizerImpl::note_origin; "
          "internal).")
      .def_property_readonly("class_name", [](const Optimizer& o) { return o->class_name(); })
      .def_property_readonly("iterations", [](const Optimizer& o) { return o->iterations(); })
      .def_property(
          "learning_rate", [](const Optimizer& o) { return o->current_learning_rate(); },
          [](const Optimizer& o, double lr) { o->set_learning_rate(lr); })
      .def_property_readonly("variables",
                             [](const Optimizer& o) {
                               py::list out;
                               for (const Variable& v : o->variables()) out.append(py::cast(v));
                               return out;
                             })
      .def(
          "get_hyperparameter",
          [](const Optimizer& o, const std::string& name) { return o->hyperparameter(name); },
          py::arg("name"))
      .def(
          "set_hyperparameter",
          [](const Optimizer& o, const std::string& name, double value) {
            o->set_hyperparameter(name, value);
          },
          py::arg("name"), py::arg("value"))
      .def("get_config", [](const Optimizer& o) { return from_json(o->get_config()); })
      .def(
          "apply_gradients",
          [](const Optimizer& o, const py::iterable& grads_and_vars) {
            std::vector<Tensor> grads;
            std::vector<Variable> vars;
            for (const py::handle& gv : grads_and_vars) {
              py::tuple pair = gv.cast<py::tuple>();
              grads.push_back(pair[0].is_none() ? Tensor() : to_tensor(pair[0]));
              vars.push_back(pair[1].cast<Variable>());
            }
            o->apply_gradients(grads, vars);
          },
          py::arg("grads_and_vars"),
          "One update from (gradient, variable) pairs, as Keras' apply_gradients.")
      .def("__repr__",
           [](const Optimizer& o) { return "<kiln.keras optimizer " + o->class_name() + ">"; });
  m.def(
      "_optimizer_from_config",
      [](const std::string& class_name, const py::dict& config, const py::handle& schedule) {
        Optimizer o = saving_detail::optimizer_from_config(
            Json{{"class_name", class_name}, {"config", to_json(config)}});
        if (!schedule.is_none()) o->set_schedule(schedule_from_py(schedule));
        return o;
      },
      py::arg("class_name"), py::arg("config"), py::arg("schedule") = py::none());

  // ---- metrics ----
  py::class_<Metric>(m, "Metric", "A stateful metric (kiln::Metric).")
      .def(py::init([](const std::string& name) { return Metric(name); }), py::arg("name"))
      .def_property_readonly("name", [](const Metric& mt) { return mt->name(); })
      .def(
          "update_state",
          [](const Metric& mt, const py::handle& y_true, const py::handle& y_pred,
             const py::handle& sample_weight) {
            Tensor p = to_tensor(y_pred);
            mt->update_state(to_tensor(y_true, &p), p,
                             sample_weight.is_none() ? Tensor() : to_tensor(sample_weight, &p));
          },
          py::arg("y_true"), py::arg("y_pred"), py::arg("sample_weight") = py::none())
      .def("result", [](const Metric& mt) { return mt->result(); })
      .def("reset_state", [](const Metric& mt) { mt->reset_state(); })
      .def("__repr__", [](const Metric& mt) { return "<kiln.keras metric " + mt->name() + ">"; });
  py::module_ metrics = m.def_submodule("_metrics");
  metrics.def("sparse_categorical_accuracy", &metrics::sparse_categorical_accuracy,
              py::arg("name") = "sparse_categorical_accuracy");
  metrics.def("categorical_accuracy", &metrics::categorical_accuracy,
              py::arg("name") = "categorical_accuracy");
  metrics.def("binary_accuracy", &metrics::binary_accuracy, py::arg("name") = "binary_accuracy",
              py::arg("threshold") = 0.5);
  metrics.def("mean", &metrics::mean, py::arg("name") = "mean");
  metrics.def("top_k_categorical_accuracy", &metrics::top_k_categorical_accuracy, py::arg("k") = 5,
              py::arg("name") = "top_k_categorical_accuracy");
  metrics.def("sparse_top_k_categorical_accuracy", &metrics::sparse_top_k_categorical_accuracy,
              py::arg("k") = 5, py::arg("name") = "sparse_top_k_categorical_accuracy");
  metrics.def("mean_absolute_error", &metrics::mean_absolute_error,
              py::arg("name") = "mean_absolute_error");
  metrics.def("precision", &metrics::precision, py::arg("name") = "precision",
              py::arg("threshold") = 0.5);
  metrics.def("recall", &metrics::recall, py::arg("name") = "recall", py::arg("threshold") = 0.5);
  metrics.def("auc", &metrics::auc, py::arg("name") = "auc", py::arg("num_thresholds") = 200);

  // ---- callbacks ----
  py::class_<Callback, PyCallback, std::shared_ptr<Callback>>(
      m, "Callback", py::dynamic_attr(),
      "Keras' callback hooks; subclass it in Python and override on_epoch_end(epoch, logs) etc.")
      .def(py::init<>())
      .def_property_readonly(
          "model",
          [](const Callback& c) -> py::object {
            if (c.model() == nullptr) return py::none();
            return py::cast(std::static_pointer_cast<ModelImpl>(c.model()->shared_from_this()));
          })
      .def_property_readonly("params", &Callback::params)
      .def("on_train_begin", &Callback::on_train_begin, py::arg("logs") = Logs{})
      .def("on_train_end", &Callback::on_train_end, py::arg("logs") = Logs{})
      .def("on_epoch_begin", &Callback::on_epoch_begin, py::arg("epoch"), py::arg("logs") = Logs{})
      .def("on_epoch_end", &Callback::on_epoch_end, py::arg("epoch"), py::arg("logs") = Logs{})
      .def("on_train_batch_begin", &Callback::on_train_batch_begin, py::arg("batch"),
           py::arg("logs") = Logs{})
      .def("on_train_batch_end", &Callback::on_train_batch_end, py::arg("batch"),
           py::arg("logs") = Logs{})
      .def("on_test_begin", &Callback::on_test_begin, py::arg("logs") = Logs{})
      .def("on_test_end", &Callback::on_test_end, py::arg("logs") = Logs{})
      .def("on_test_batch_begin", &Callback::on_test_batch_begin, py::arg("batch"),
           py::arg("logs") = Logs{})
      .def("on_test_batch_end", &Callback::on_test_batch_end, py::arg("batch"),
           py::arg("logs") = Logs{})
      .def("on_predict_begin", &Callback::on_predict_begin, py::arg("logs") = Logs{})
      .def("on_predict_end", &Callback::on_predict_end, py::arg("logs") = Logs{})
      .def("on_predict_batch_begin", &Callback::on_predict_batch_begin, py::arg("batch"),
           py::arg("logs") = Logs{})
      .def("on_predict_batch_end", &Callback::on_predict_batch_end, py::arg("batch"),
           py::arg("logs") = Logs{});

  py::class_<History, Callback, std::shared_ptr<History>>(m, "History",
                                                          "What fit returns: .history, .epoch.")
      .def(py::init<>())
      .def_readonly("history", &History::history)
      .def_readonly("epoch", &History::epoch);

  py::class_<EarlyStopping, Callback, std::shared_ptr<EarlyStopping>>(m, "EarlyStopping")
      .def(py::init([](const std::string& monitor, double min_delta, int patience, int verbose,
                       const std::string& mode, std::optional<double> baseline,
                       bool restore_best_weights, int start_from_epoch) {
             return std::make_shared<EarlyStopping>(
                 EarlyStoppingOptions{monitor, min_delta, patience, monitor_mode(mode), baseline,
                                      restore_best_weights, start_from_epoch, verbose});
           }),
           py::arg("monitor") = "val_loss", py::arg("min_delta") = 0.0, py::arg("patience") = 0,
           py::arg("verbose") = 0, py::arg("mode") = "auto", py::arg("baseline") = py::none(),
           py::arg("restore_best_weights") = false, py::arg("start_from_epoch") = 0)
      .def_property_readonly("stopped_epoch", &EarlyStopping::stopped_epoch)
      .def_property_readonly("best_epoch", &EarlyStopping::best_epoch);
  py::class_<ModelCheckpoint, Callback, std::shared_ptr<ModelCheckpoint>>(m, "ModelCheckpoint")
      .def(py::init([](const std::string& filepath, const std::string& monitor, int verbose,
                       bool save_best_only, const std::string& mode) {
             return std::make_shared<ModelCheckpoint>(
                 filepath,
                 ModelCheckpointOptions{monitor, save_best_only, monitor_mode(mode), verbose});
           }),
           py::arg("filepath"), py::arg("monitor") = "val_loss", py::arg("verbose") = 0,
           py::arg("save_best_only") = false, py::arg("mode") = "auto");
  py::class_<CSVLogger, Callback, std::shared_ptr<CSVLogger>>(m, "CSVLogger")
      .def(py::init([](const std::string& filename, const std::string& separator, bool append) {
             if (separator.size() != 1)
               throw Error("CSVLogger: separator must be one character, got \"" + separator + "\"");
             return std::make_shared<CSVLogger>(filename, separator[0], append);
           }),
           py::arg("filename"), py::arg("separator") = ",", py::arg("append") = false);
  py::class_<LearningRateScheduler, Callback, std::shared_ptr<LearningRateScheduler>>(
      m, "LearningRateScheduler")
      .def(py::init([](const py::function& schedule, int verbose) {
             SharedPyObject f(schedule);
             return std::make_shared<LearningRateScheduler>(
                 [f](int epoch, double lr) {
                   py::gil_scoped_acquire gil;
                   return f.get()(epoch, lr).cast<double>();
                 },
                 verbose);
           }),
           py::arg("schedule"), py::arg("verbose") = 0);
  py::class_<ReduceLROnPlateau, Callback, std::shared_ptr<ReduceLROnPlateau>>(m,
                                                                              "ReduceLROnPlateau")
      .def(py::init([](const std::string& monitor, double factor, int patience, int verbose,
                       const std::string& mode, double min_delta, int cooldown, double min_lr) {
             ReduceLROnPlateauOptions o;
             o.monitor = monitor;
             o.factor = factor;
             o.patience = patience;
             o.verbose = verbose;
             o.mode = monitor_mode(mode);
             o.min_delta = min_delta;
             o.cooldown = cooldown;
             o.min_lr = min_lr;
             return std::make_shared<ReduceLROnPlateau>(o);
           }),
           py::arg("monitor") = "val_loss", py::arg("factor") = 0.1, py::arg("patience") = 10,
           py::arg("verbose") = 0, py::arg("mode") = "auto", py::arg("min_delta") = 1e-4,
           py::arg("cooldown") = 0, py::arg("min_lr") = 0.0);

  // ---- data ----
  m.def(
      "_load_digits",
      [](double test_split, uint64_t seed) {
        auto [train, test] = data::train_test_split(data::load_digits(), test_split, seed);
        return py::make_tuple(py::make_tuple(numpy_view(train.x), numpy_view(train.y)),
                              py::make_tuple(numpy_view(test.x), numpy_view(test.y)));
      },
      py::arg("test_split") = 0.2, py::arg("seed") = 0,
      "The shipped UCI digits as ((x_train, y_train), (x_test, y_test)), split as `kiln "
      "train` splits them (kiln::data::train_test_split).");
}

}  // namespace kiln::python
