// The compile configuration of a saved model (Keras' compile_config): the optimizer (class,
// hyperparameters, schedule, clipping), the losses, loss weights and metrics, run_eagerly.
#include <nlohmann/json.hpp>

#include "kiln/keras/saving/from_config.h"

namespace kiln::saving_detail {
namespace {

[[noreturn]] void bad(const std::string& entry, const Json& value, const std::string& what) {
  throw Error(
      fmt::format("compile_config entry \"{}\" {}, got {:.300}", entry, what, value.dump()));
}

std::optional<double> optional_number(const Json& c, const char* key) {
  if (!c.contains(key) || c[key].is_null()) return std::nullopt;
  if (!c[key].is_number()) bad(std::string("optimizer.") + key, c[key], "should be a number");
  return c[key].get<double>();
}

double number(const Json& c, const char* key, double fallback) {
  return optional_number(c, key).value_or(fallback);
}

Json loss_config(const Loss& loss) {
  if (!loss.defined()) return nullptr;
  if (!loss.from_logits() && !loss.ignore_class()) return loss.name();
  Json config{{"from_logits", loss.from_logits()}};
  if (loss.ignore_class()) config["ignore_class"] = *loss.ignore_class();
  return Json{{"class_name", loss.name()}, {"config", config}};
}

Loss loss_from_config(const std::string& entry, const Json& j) {
  try {
    if (j.is_string()) return Loss(j.get<std::string>());
    if (j.is_object() && j.contains("class_name") && j["class_name"].is_string()) {
      const std::string name = j["class_name"].get<std::string>();
      bool logits = j.contains("config") && j["config"].value("from_logits", false);
      if (name == "binary_crossentropy") return losses::binary_crossentropy(logits);
      if (name == "categorical_crossentropy") return losses::categorical_crossentropy(logits);
      if (name == "sparse_categorical_crossentropy") {
        std::optional<int64_t> ignore;
        if (j.contains("config") && j["config"].contains("ignore_class") &&
            !j["config"]["ignore_class"].is_null())
          ignore = j["config"]["ignore_class"].get<int64_t>();
        return losses::sparse_categorical_crossentropy(logits, ignore);
      }
      return Loss(name);
    }
  } catch (const Error& e) {
    bad(entry, j,
        fmt::format("is not a loss kiln knows ({}); load the model with compile = false and "
                    "compile it with your loss",
                    e.what()));
  }
  bad(entry, j, "should be a loss name or {\"class_name\", \"config\"}");
}

Json metric_list(const std::vector<Metric>& metrics) {
  Json out = Json::array();
  for (const Metric& m : metrics)
    out.push_back(m.requested_name().empty() ? m->name() : m.requested_name());
  return out;
}

std::vector<Metric> metrics_from(const std::string& entry, const Json& j) {
  if (!j.is_array()) bad(entry, j, "should be a list of metric names");
  std::vector<Metric> out;
  for (const Json& m : j) {
    if (!m.is_string()) bad(entry, m, "should be a metric name");
    try {
      out.emplace_back(m.get<std::string>());
    } catch (const Error& e) {
      bad(entry, m,
          fmt::format("is not a metric kiln knows ({}); load the model with compile = false and "
                      "compile it with your metrics",
                      e.what()));
    }
  }
  return out;
}

Json metric_spec_config(const MetricSpec& spec) {
  if (!spec.per_output().empty()) {
    Json out = Json::array();
    for (const auto& list : spec.per_output()) out.push_back(metric_list(list));
    return out;
  }
  if (!spec.by_name().empty()) {
    Json out = Json::object();
    for (const auto& [name, list] : spec.by_name()) out[name] = metric_list(list);
    return out;
  }
  return metric_list(spec.all());
}

MetricSpec metric_spec_from(const std::string& entry, const Json& j) {
  if (j.is_null()) return {};
  if (j.is_object()) {
    std::map<std::string, std::vector<Metric>> by;
    for (const auto& [name, list] : j.items()) by[name] = metrics_from(entry + "." + name, list);
    return MetricSpec::by_output(std::move(by));
  }
  if (j.is_array() && !j.empty() && j[0].is_array()) {
    std::vector<std::vector<Metric>> lists;
    for (const Json& list : j) lists.push_back(metrics_from(entry, list));
    return MetricSpec::per_output(std::move(lists));
  }
  return MetricSpec(metrics_from(entry, j));
}

}  // namespace

Json optimizer_config(const Optimizer& optimizer) {
  return Json{{"class_name", optimizer->class_name()}, {"config", optimizer->get_config()}};
}

Optimizer optimizer_from_config(const Json& j) {
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string() ||
      !j.contains("config") || !j["config"].is_object())
    bad("optimizer", j, "should be {\"class_name\": ..., \"config\": {...}}");
  const std::string cls = j["class_name"].get<std::string>();
  const Json& c = j["config"];
  GradientClipping clip{optional_number(c, "clipnorm"), optional_number(c, "clipvalue"),
                        optional_number(c, "global_clipnorm")};
  const bool scheduled = c.contains("learning_rate") && c["learning_rate"].is_object();
  auto lr = [&](double fallback) {
    return scheduled ? fallback : number(c, "learning_rate", fallback);
  };
  auto flag = [&](const char* key) {
    if (c.contains(key) && !c[key].is_boolean())
      bad(std::string("optimizer.") + key, c[key], "should be true or false");
    return c.value(key, false);
  };
  Optimizer opt;
  if (cls == "SGD") {
    SGDOptions o;
    opt = SGD({lr(o.learning_rate), number(c, "momentum", o.momentum), flag("nesterov"), clip});
  } else if (cls == "Adam") {
    AdamOptions o;
    opt = Adam({lr(o.learning_rate), number(c, "beta_1", o.beta_1), number(c, "beta_2", o.beta_2),
                number(c, "epsilon", o.epsilon), clip, flag("amsgrad")});
  } else if (cls == "AdamW") {
    AdamWOptions o;
    opt = AdamW({lr(o.learning_rate), number(c, "weight_decay", o.weight_decay),
                 number(c, "beta_1", o.beta_1), number(c, "beta_2", o.beta_2),
                 number(c, "epsilon", o.epsilon), clip, flag("amsgrad")});
  } else if (cls == "RMSprop") {
    RMSpropOptions o;
    opt = RMSprop({lr(o.learning_rate), number(c, "rho", o.rho), number(c, "momentum", o.momentum),
                   number(c, "epsilon", o.epsilon), flag("centered"), clip});
  } else {
    bad("optimizer.class_name", j["class_name"],
        "is not an optimizer kiln can rebuild (SGD, Adam, AdamW, RMSprop); load the model with "
        "compile = false and compile it with your optimizer");
  }
  if (scheduled) opt->set_schedule(schedules::from_config(c["learning_rate"]));
  return opt;
}

Json compile_config(const CompileOptions& o) {
  Json c;
  c["optimizer"] = optimizer_config(o.optimizer);
  if (!o.loss.list().empty()) {
    c["loss"] = Json::array();
    for (const Loss& l : o.loss.list()) c["loss"].push_back(loss_config(l));
  } else if (!o.loss.by_name().empty()) {
    c["loss"] = Json::object();
    for (const auto& [name, l] : o.loss.by_name()) c["loss"][name] = loss_config(l);
  } else {
    c["loss"] = loss_config(o.loss.single());
  }
  if (!o.loss_weights.list().empty())
    c["loss_weights"] = o.loss_weights.list();
  else if (!o.loss_weights.by_name().empty())
    c["loss_weights"] = o.loss_weights.by_name();
  else
    c["loss_weights"] = nullptr;
  c["metrics"] = metric_spec_config(o.metrics);
  c["weighted_metrics"] = metric_spec_config(o.weighted_metrics);
  c["run_eagerly"] = o.run_eagerly;
  return c;
}

CompileOptions compile_options_from_config(const Json& c) {
  if (!c.is_object()) bad("", c, "should be an object");
  CompileOptions o;
  if (!c.contains("optimizer")) bad("optimizer", nullptr, "is missing");
  o.optimizer = optimizer_from_config(c["optimizer"]);
  const Json& loss = c.contains("loss") ? c["loss"] : Json(nullptr);
  if (loss.is_array()) {
    std::vector<Loss> list;
    for (const Json& l : loss) list.push_back(l.is_null() ? Loss() : loss_from_config("loss", l));
    o.loss = LossSpec(std::move(list));
  } else if (loss.is_object() && !loss.contains("class_name")) {
    std::map<std::string, Loss> by;
    for (const auto& [name, l] : loss.items())
      if (!l.is_null()) by[name] = loss_from_config("loss." + name, l);
    o.loss = LossSpec::by_output(std::move(by));
  } else if (!loss.is_null()) {
    o.loss = loss_from_config("loss", loss);
  }
  const Json& weights = c.contains("loss_weights") ? c["loss_weights"] : Json(nullptr);
  try {
    if (weights.is_array())
      o.loss_weights = weights.get<std::vector<double>>();
    else if (weights.is_object())
      o.loss_weights = LossWeights::by_output(weights.get<std::map<std::string, double>>());
    else if (!weights.is_null())
      bad("loss_weights", weights, "should be null, a list or an object of numbers");
  } catch (const Json::exception&) {
    bad("loss_weights", weights, "should hold numbers");
  }
  o.metrics = metric_spec_from("metrics", c.contains("metrics") ? c["metrics"] : Json(nullptr));
  o.weighted_metrics = metric_spec_from(
      "weighted_metrics", c.contains("weighted_metrics") ? c["weighted_metrics"] : Json(nullptr));
  if (c.contains("run_eagerly")) {
    if (!c["run_eagerly"].is_boolean()) bad("run_eagerly", c["run_eagerly"], "should be a bool");
    o.run_eagerly = c["run_eagerly"].get<bool>();
  }
  return o;
}

}  // namespace kiln::saving_detail
