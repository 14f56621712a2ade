// Layers from Python: kiln._kiln._Layer is kiln::LayerImpl (held by std::shared_ptr, as the
// C++ handles hold it), with the PyLayer trampoline so Python subclasses override build, call
// and get_config. Built-in layers are made from their Keras config by the C++ registry
// (layer_from_config), so python/kiln/keras/layers.py generates one class per registered name
// instead of keeping a second list. Also: kiln.keras.Input, and the JSON / shape / Arrays
// conversions the other keras_*.cc files share.
#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "keras_bindings.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/rnn.h"
#include "kiln/keras/models/input_layer.h"
#include "kiln/keras/saving/from_config.h"
#include "kiln/keras/saving/serialization.h"
#include "numpy_interop.h"

namespace kiln::python {

Json to_json(const py::handle& value) {
  py::object dumps = py::module_::import("json").attr("dumps");
  return Json::parse(dumps(value).cast<std::string>());
}

py::object from_json(const Json& value) {
  return py::module_::import("json").attr("loads")(value.dump());
}

py::tuple shape_to_py(const Shape& shape) {
  py::list dims;
  for (int64_t d : shape) {
    if (d == kUnknownDim)
      dims.append(py::none());
    else
      dims.append(d);
  }
  return py::tuple(dims);
}

Shape shape_from_py(const py::handle& shape) {
  if (py::isinstance<py::int_>(shape)) return Shape({shape.cast<int64_t>()});
  std::vector<int64_t> dims;
  for (const py::handle& d : shape) dims.push_back(d.is_none() ? kUnknownDim : d.cast<int64_t>());
  return Shape(dims);
}

Arrays to_arrays(const py::handle& value) {
  if (value.is_none()) return Arrays();
  if (py::isinstance<py::dict>(value)) {
    std::map<std::string, Tensor> named;
    for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(value))
      named[k.cast<std::string>()] = to_tensor(v);
    return Arrays::by_name(std::move(named));
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::vector<Tensor> list;
    for (const py::handle& v : value) list.push_back(to_tensor(v));
    return Arrays(std::move(list));
  }
  return Arrays(to_tensor(value));
}

Layer to_layer(const py::handle& value) {
  if (!py::isinstance<LayerImpl>(value))
    throw py::type_error("expected a kiln.keras layer or model, got " +
                         std::string(py::str(py::type::of(value).attr("__name__"))));
  return Layer(value.cast<std::shared_ptr<LayerImpl>>());
}

namespace {

using PyLayerImpl = PyLayer<LayerImpl>;

py::list variables_list(const std::vector<Variable>& vars) {
  py::list out;
  for (const Variable& v : vars) out.append(py::cast(v));
  return out;
}

// layer(inputs, training=False): inputs are one tensor or a list; one output comes back as a
// tensor, several as a list (Keras: a layer returning one tensor returns it as such).
py::object call_layer(const std::shared_ptr<LayerImpl>& self, const py::handle& inputs,
                      bool training) {
  std::vector<Tensor> in;
  if (py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs)) {
    for (const py::handle& t : inputs) in.push_back(to_tensor(t));
  } else {
    in.push_back(to_tensor(inputs));
  }
  std::vector<Tensor> out = Layer(self)(in, training);
  if (out.size() == 1) return py::cast(out[0]);
  py::list l;
  for (Tensor& t : out) l.append(py::cast(std::move(t)));
  return l;
}

Initializer initializer_from_py(const py::handle& value) {
  if (value.is_none()) return initializers::glorot_uniform();
  if (py::isinstance<py::str>(value)) return Initializer(value.cast<std::string>());
  if (py::isinstance<py::float_>(value) || py::isinstance<py::int_>(value))
    return initializers::constant(value.cast<double>());
  // A kiln.keras.initializers object, or Keras' serialized form {"class_name", "config"}.
  py::object serialized = py::hasattr(value, "_kiln_config")
                              ? value.attr("_kiln_config")()
                              : py::reinterpret_borrow<py::object>(value);
  if (py::isinstance<py::dict>(serialized) && serialized.contains("class_name")) {
    std::map<std::string, double> args;
    std::optional<int64_t> seed;
    py::dict config = serialized.contains("config") && !serialized["config"].is_none()
                          ? serialized["config"].cast<py::dict>()
                          : py::dict();
    for (const auto& [k, v] : config) {
      const std::string key = k.cast<std::string>();
      if (key == "seed") {
        if (!v.is_none()) seed = v.cast<int64_t>();
      } else if (py::isinstance<py::float_>(v) ||
                 (py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v))) {
        args[key] = v.cast<double>();
      } else {
        throw Error("add_weight: initializer argument \"" + key + "\" must be a number, got " +
                    std::string(py::repr(v)));
      }
    }
    return initializer_from_keras(serialized["class_name"].cast<std::string>(), args, seed);
  }
  throw py::type_error(
      "add_weight: initializer must be a name such as \"glorot_uniform\" or \"zeros\", a "
      "kiln.keras.initializers object, or a number (a constant), got " +
      std::string(py::str(py::type::of(value).attr("__name__"))));
}

Regularizer regularizer_from_py(const py::handle& value) {
  if (value.is_none()) return {};
  py::dict d = value.cast<py::dict>();
  return {d.contains("l1") ? d["l1"].cast<double>() : 0.0,
          d.contains("l2") ? d["l2"].cast<double>() : 0.0};
}

}  // namespace

namespace {

// A policy from Python: a name ("mixed_bfloat16"), a DTypePolicy, a kiln/numpy dtype, or a
// serialized policy (a dict).
DTypePolicy policy_from_py(const py::handle& value) {
  if (py::isinstance<DTypePolicy>(value)) return value.cast<DTypePolicy>();
  if (py::isinstance<py::str>(value)) return DTypePolicy(value.cast<std::string>());
  if (py::isinstance<py::dict>(value)) return DTypePolicy::deserialize(to_json(value));
  return DTypePolicy(dtype_from_python(value));
}

void bind_dtype_policy(py::module_& m) {
  py::class_<DTypePolicy>(m, "DTypePolicy",
                          R"(Keras 3's DTypePolicy: a layer's variable and compute dtypes.

DTypePolicy("mixed_bfloat16"): variables float32, computation bfloat16; "float32", "float64",
"bfloat16" (or any kiln dtype): both. float16 policies are refused (kiln has no float16).
No name: the global policy (kiln.keras.mixed_precision.global_policy()).)")
      .def(py::init([](const py::object& name) {
             return name.is_none() ? mixed_precision::global_policy() : policy_from_py(name);
           }),
           py::arg("name") = py::none())
      .def_property_readonly("name", &DTypePolicy::name)
      .def_property_readonly(
          "compute_dtype",
          [](const DTypePolicy& p) { return std::string(dtype_name(p.compute_dtype())); })
      .def_property_readonly(
          "variable_dtype",
          [](const DTypePolicy& p) { return std::string(dtype_name(p.variable_dtype())); })
      .def_property_readonly("quantization_mode", [](const DTypePolicy&) { return py::none(); })
      .def("get_config", [](const DTypePolicy& p) { return from_json(p.get_config()); })
      .def_static(
          "from_config",
          [](const py::dict& config) { return DTypePolicy(config["name"].cast<std::string>()); },
          py::arg("config"))
      .def("_kiln_config", [](const DTypePolicy& p) { return from_json(p.serialize()); })
      .def("__repr__", &DTypePolicy::repr)
      .def("__eq__",
           [](const DTypePolicy& a, const py::object& b) {
             return py::isinstance<DTypePolicy>(b) && a == b.cast<DTypePolicy>();
           })
      .def("__hash__", [](const DTypePolicy& p) { return py::hash(py::str(p.name())); });
  m.def(
      "_set_global_policy",
      [](const py::object& policy) {
        mixed_precision::set_global_policy(policy.is_none() ? DTypePolicy()
                                                            : policy_from_py(policy));
      },
      py::arg("policy"));
  m.def("_global_policy", &mixed_precision::global_policy);
}

}  // namespace

void bind_keras_layers(py::module_& m) {
  bind_dtype_policy(m);
  py::class_<LayerImpl, PyLayerImpl, std::shared_ptr<LayerImpl>> layer(
      m, "_Layer", py::dynamic_attr(),
      "kiln::LayerImpl: the base of kiln.keras.layers.Layer (python/kiln/keras/layers.py).");
  layer.def(py::init_alias<std::string, std::string>(), py::arg("class_name"), py::arg("name") = "")
      .def(
          "_kiln_attach",
          [](LayerImpl& self, py::object obj) {
            if (auto* layer = dynamic_cast<PyLayer<LayerImpl>*>(&self))
              layer->attach(std::move(obj));
            else if (auto* model = dynamic_cast<PyLayer<ModelImpl>*>(&self))
              model->attach(std::move(obj));
          },
          "Keeps the Python subclass instance alive while C++ holds the layer (internal).")
      .def(
          "_note_origin",
          [](LayerImpl& self, std::string file, uint32_t line) {
            self.note_origin({std::move(file), line, 0});
          },
          py::arg("file"), py::arg("line"),
          "Where the user's Python code put the layer into a model (LayerImpl::note_origin; "
          "the first noted stays; internal).")
      .def_property_readonly(
          "_origin_known", [](const LayerImpl& self) { return self.origin().known(); },
          "Whether the layer's origin is noted (internal).")
      .def_property_readonly("name", &LayerImpl::name)
      .def_property_readonly("class_name", &LayerImpl::class_name)
      .def_property_readonly("built", &LayerImpl::built)
      .def_readwrite("supports_masking", &LayerImpl::supports_masking,
                     "Whether the layer passes its input's mask on (Keras' supports_masking).")
      .def_property("trainable", &LayerImpl::trainable, &LayerImpl::set_trainable)
      .def_property(
          "dtype_policy", [](const LayerImpl& l) { return l.dtype_policy(); },
          [](LayerImpl& l, const py::handle& p) { l.set_dtype_policy(policy_from_py(p)); },
          "The layer's DTypePolicy (Keras' layer.dtype_policy); settable before the build.")
      .def_property_readonly(
          "compute_dtype",
          [](const LayerImpl& l) { return std::string(dtype_name(l.compute_dtype())); })
      .def_property_readonly(
          "variable_dtype",
          [](const LayerImpl& l) { return std::string(dtype_name(l.variable_dtype())); })
      .def_readwrite("autocast", &LayerImpl::autocast,
                     "Keras' autocast: cast floating inputs and variables to the compute dtype.")
      .def_property_readonly("weights",
                             [](const LayerImpl& l) { return variables_list(l.weights()); })
      .def_property_readonly(
          "trainable_weights",
          [](const LayerImpl& l) { return variables_list(l.trainable_weights()); })
      .def_property_readonly(
          "non_trainable_weights",
          [](const LayerImpl& l) { return variables_list(l.non_trainable_weights()); })
      .def_property_readonly("variables",
                             [](const LayerImpl& l) { return variables_list(l.variables()); })
      .def_property_readonly("losses", &LayerImpl::losses)
      .def_property_readonly("_sublayers",
                             [](const LayerImpl& l) {
                               py::list out;
                               for (const Layer& s : l.sublayers()) out.append(py::cast(s.ptr()));
                               return out;
                             })
      .def_property_readonly("input_shapes",
                             [](const LayerImpl& l) {
                               py::list out;
                               for (const Shape& s : l.build_input_shapes())
                                 out.append(shape_to_py(s));
                               return out;
                             })
      .def("count_params", &LayerImpl::count_params)
      .def("get_weights",
           [](const LayerImpl& l) {
             py::list out;
             for (const Tensor& t : l.get_weights()) out.append(numpy_view(t).attr("copy")());
             return out;
           })
      .def("set_weights",
           [](LayerImpl& l, const py::list& values) {
             std::vector<Tensor> ts;
             for (const py::handle& v : values) ts.push_back(copy(to_tensor(v)));
             l.set_weights(ts);
           })
      .def(
          "_add_weight",
          [](LayerImpl& l, const std::string& name, const py::handle& shape,
             const py::handle& initializer, bool trainable, const py::handle& dtype,
             const py::handle& regularizer) {
            return l.add_weight(
                name, shape_from_py(shape), initializer_from_py(initializer), trainable,
                dtype.is_none() ? std::nullopt : std::optional<DType>(dtype_from_python(dtype)),
                regularizer_from_py(regularizer));
          },
          py::arg("name"), py::arg("shape"), py::arg("initializer"), py::arg("trainable"),
          py::arg("dtype"), py::arg("regularizer"))
      .def(
          "add_loss", [](LayerImpl& l, const py::handle& loss) { l.add_loss(to_tensor(loss)); },
          py::arg("loss"))
      .def(
          "_track_layer", [](LayerImpl& l, const py::handle& sub) { l.track_layer(to_layer(sub)); },
          py::arg("layer"))
      .def("_base_get_config",
           [](const LayerImpl& l) {
             // The C++ class's own config, never a Python override (Layer.get_config's base).
             if (dynamic_cast<const PyLayer<LayerImpl>*>(&l) != nullptr ||
                 dynamic_cast<const PyLayer<ModelImpl>*>(&l) != nullptr)
               return from_json(l.LayerImpl::get_config());
             return from_json(l.get_config());
           })
      .def(
          "compute_output_shape",
          [](LayerImpl& l, const py::handle& shape) -> py::object {
            // A list of shapes (several inputs), or one shape.
            bool many = py::len(shape) > 0 && (py::isinstance<py::tuple>(shape[py::int_(0)]) ||
                                               py::isinstance<py::list>(shape[py::int_(0)]));
            std::vector<Shape> in;
            if (many)
              for (const py::handle& s : shape) in.push_back(shape_from_py(s));
            else
              in.push_back(shape_from_py(shape));
            std::vector<Shape> out = l.compute_output_shape(in);
            if (out.size() == 1) return shape_to_py(out[0]);
            py::list l2;
            for (const Shape& s : out) l2.append(shape_to_py(s));
            return l2;
          },
          py::arg("input_shape"))
      .def("__call__", &call_layer, py::arg("inputs"), py::arg("training") = false)
      .def("__repr__", [](const LayerImpl& l) {
        return "<kiln.keras " + l.class_name() + " \"" + l.name() + "\">";
      });

  m.def(
      "_layer_from_config",
      [](const std::string& class_name, const py::dict& config) {
        return layer_from_config(Json{{"class_name", class_name}, {"config", to_json(config)}})
            .ptr();
      },
      py::arg("class_name"), py::arg("config"),
      "A built-in (or registered) layer from its Keras config (kiln::layer_from_config).");
  m.def(
      "_rnn_with_cell",
      [](const py::handle& cell, const py::dict& config) {
        // Keras' RNN(cell) keeps the cell object: the RNN factory with this cell, and the
        // config checks of every layer_from_config.
        const Layer given = to_layer(cell);
        const CustomObjects with_cell{
            {"RNN", [given](const Json& c) { return rnn_from_config(c, given); }}};
        return layer_from_config(Json{{"class_name", "RNN"}, {"config", to_json(config)}},
                                 with_cell)
            .ptr();
      },
      py::arg("cell"), py::arg("config"),
      "layers.RNN(cell, ...) around the given cell (its config without \"cell\").");
  m.def(
      "_rnn_cell",
      [](const py::handle& l) {
        const Layer layer = to_layer(l);
        const auto* rnn = dynamic_cast<const RNNImpl*>(&layer.impl());
        if (rnn == nullptr)
          throw Error("layer \"" + layer->name() + "\" (" + layer->class_name() +
                      ") is not an RNN; only layers.RNN has a cell");
        return rnn->cell().ptr();
      },
      py::arg("layer"));
  m.def(
      "_builtin_layer_classes",
      [] {
        py::list names;
        for (const auto& [name, factory] : saving_detail::builtin_layer_factories())
          names.append(name);
        return names;
      },
      "The class names of C++ layer registry (keras/saving/builtin_layers.cc).");
  m.def(
      "_serialize_layer",
      [](const py::handle& l) { return from_json(serialize_layer(to_layer(l))); },
      py::arg("layer"));
  m.def(
      "Input",
      [](const py::handle& shape, const py::handle& dtype, const std::string& name) {
        return Input(shape_from_py(shape), dtype.is_none() ? DType::f32 : dtype_from_python(dtype),
                     name);
      },
      py::arg("shape"), py::arg("dtype") = py::none(), py::arg("name") = "",
      "A symbolic input of shape (None, *shape) for functional models (kiln::Input).");
  m.def("clear_session", &clear_session,
        "Forgets the layer names handed out so far (Keras' clear_session).");
  m.def("set_random_seed", &set_random_seed, py::arg("seed"),
        "Seeds kiln's global seed sequence (initializers, dropout), as kiln::set_random_seed.");
}

}  // namespace kiln::python
