// Model: a layer that can be trained (Keras' Model). Three ways to make one:
//  - Sequential: a stack of layers (models/sequential.h);
//  - functional: Model(inputs, outputs) over the DAG of layer calls made on kiln::Input
//    tensors (models/functional.h);
//  - subclassed: derive from ModelImpl, create sublayers with track(...), override call.
// compile/fit/evaluate/predict run traced steps by default: the training step (forward, loss,
// gradients, optimizer update), the test step and the predict step are each a kiln::function,
// traced once per batch shape and then run as graphs. run_eagerly=true runs them eagerly; both
// modes give the same results (the graph runs the same kernels in the same order).
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "kiln/frontend/function/concrete_function.h"
#include "kiln/keras/data/arrays.h"
#include "kiln/keras/layers/layer.h"
#include "kiln/keras/training/callback.h"
#include "kiln/keras/training/compile_options.h"

namespace kiln {

// Options of ModelImpl::save / kiln::save_model (keras/saving/saving.h).
struct SaveOptions {
  bool overwrite = true;          // replace a model saved at the path before
  bool include_optimizer = true;  // a compiled model's optimizer state (optimizer.safetensors)
};

// Where ModelImpl's methods live: models/ holds the model itself (construction and layers:
// model.cc, functional.cc, sequential.cc; the summary: summary.cc; its files: model_files.cc),
// training/ the trainer part, as Keras 3 splits Model from Trainer (compile, fit, evaluate,
// predict and the traced steps: fit.cc, fit_dataset.cc, model_steps.cc).
class ModelImpl : public LayerImpl {
 public:
  explicit ModelImpl(std::string class_name = "Model", std::string name = "");

  // ---- the trainer (training/fit.cc, fit_dataset.cc, model_steps.cc) ----
  // Keras' compile. The loss, loss weights and metrics may be given per output (see
  // training/compile_options.h); names are checked against output_names() when it is known.
  // `loc`: where the user's code compiled the model (compile_origin).
  void compile(CompileOptions options, std::source_location loc = std::source_location::current());
  bool compiled() const { return compiled_.has_value(); }
  // The source location a traced step gives its loss nodes ("compile_loss/..."): where the
  // user's code chose the loss. Bindings set the caller's (a Python frame).
  const ir::SourceLocation& compile_origin() const { return compile_origin_; }
  void set_compile_origin(ir::SourceLocation loc) { compile_origin_ = std::move(loc); }
  const CompileOptions& compile_options() const;
  // x, y and sample weights: one tensor, a list in the model's input/output order, or tensors
  // by input/output name (Arrays). A model with several outputs logs "loss", "<output>_loss"
  // and "<output>_<metric>"; one output logs "loss" and "<metric>".
  std::shared_ptr<History> fit(const Arrays& x, const Arrays& y, FitOptions options = {});
  Logs evaluate(const Arrays& x, const Arrays& y, EvaluateOptions options = {});
  // The single output's predictions (kiln::Error for a model with several outputs: use
  // predict_outputs).
  Tensor predict(const Arrays& x, PredictOptions options = {});
  // One tensor per output, in output order.
  std::vector<Tensor> predict_outputs(const Arrays& x, PredictOptions options = {});
  // The same on a Dataset of batches {x, y, sample_weight} (keras/data/pipeline.h;
  // training/fit_dataset.cc): an epoch is one pass, or steps_per_epoch batches of a pass that
  // continues across epochs; batch_size, shuffle and validation_split do not apply.
  std::shared_ptr<History> fit(const data::Dataset& dataset, FitOptions options = {});
  Logs evaluate(const data::Dataset& dataset, EvaluateOptions options = {});
  Tensor predict(const data::Dataset& dataset, PredictOptions options = {});
  std::vector<Tensor> predict_outputs(const data::Dataset& dataset, PredictOptions options = {});
  Logs train_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight = {},
                      const ClassWeight& class_weight = {});
  Logs test_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight = {});
  // The keys of the train and test logs in Keras' order (its train_on_batch list): "loss",
  // each output's loss (several outputs), then the compiled metrics: every output's metrics,
  // then every output's weighted metrics, each in the order compile was given them. Only
  // "loss" before the first step (the outputs are resolved by it).
  std::vector<std::string> log_keys();
  // Set by a callback (EarlyStopping) to end fit after the current epoch.
  bool stop_training = false;

  // Names by which x and y may be given (Keras' input_names / output_names): a functional
  // model's Input and output layer names, a Sequential model's last layer for its output.
  // Empty when the model does not know them (subclassed models): lists are then matched by
  // position and outputs are named "output_0", "output_1", ... in logs.
  virtual std::vector<std::string> input_names() const { return {}; }
  virtual std::vector<std::string> output_names() const { return {}; }

  // ---- description (models/summary.cc) ----
  // Keras' summary table: Layer (type), Output Shape, Param # (+ Connected to for
  // functional models) and the parameter totals.
  void summary(std::ostream& os, int line_length = 0) const;
  std::string summary_string(int line_length = 0) const;
  // The layers in order: Sequential's list, a functional model's layers by depth, or a
  // subclassed model's tracked sublayers.
  virtual std::vector<Layer> layers() const;
  // Output shape of each layer for the summary, Keras' rule: from the layer's last
  // functional-model node, else computed from the shapes it was built with, else "?".
  virtual std::vector<std::string> layer_output_shapes() const;
  // Rows of the "Connected to" column, or empty for non-functional models.
  virtual std::vector<std::string> layer_connections() const { return {}; }

  // ---- files (models/model_files.cc): weights as safetensors, names like "dense_1/kernel" ----
  void save_weights(const std::string& path) const;
  void load_weights(const std::string& path);
  // The whole model (architecture, weights, compile configuration, optimizer state) as a
  // directory; kiln::load_model reads it back (keras/saving/saving.h, docs/saving.md).
  void save(const std::string& path, const SaveOptions& options = {}) const;

  // The traced steps fit/evaluate/predict use when !run_eagerly (created on first use; a new
  // compile() makes new ones). Exposed for kiln dump-ir and tests.
  ConcreteFunction train_step_function(const Arrays& x, const Arrays& y,
                                       const Arrays& sample_weight = {});
  // One step's results: the total loss (with regularization), each output's weighted loss
  // (outputs without a loss: undefined) and the predictions (with their keras_mask).
  struct StepResult {
    Tensor loss;
    std::vector<Tensor> output_losses, y_pred;
  };
  // One step each, in the compiled mode (traced unless run_eagerly). Sample weights must be
  // given per output already (no class weights here).
  StepResult run_train_step(const Arrays& x, const Arrays& y, const Arrays& sample_weight = {});
  StepResult run_test_step(const Arrays& x, const Arrays& y, const Arrays& sample_weight = {});
  std::vector<Tensor> run_predict_step(const Arrays& x);

 private:
  friend struct ModelSteps;
  std::optional<CompileOptions> compiled_;
  ir::SourceLocation compile_origin_;
  std::shared_ptr<struct ModelSteps> steps_;
};

namespace detail {
// Keras' summary text for output shapes: "(None, 64)" (dimensions joined by ", ", so a
// rank-1 shape is "(None)"); several outputs as "[(None, 3), (None, 4)]".
std::string summary_shape_text(const std::vector<Shape>& shapes);
// Keras' format_layer_shape for any layer (see ModelImpl::layer_output_shapes).
std::string layer_shape_text(const Layer& layer);
}  // namespace detail

// A handle to any model (Sequential, functional or subclassed).
class Model : public Layer {
 public:
  Model() = default;
  explicit Model(std::shared_ptr<ModelImpl> impl) : Layer(std::move(impl)) {}
  // Functional model from symbolic inputs and outputs (see models/functional.h).
  Model(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
        const std::string& name = "");
  Model(const Tensor& input, const Tensor& output, const std::string& name = "")
      : Model(std::vector<Tensor>{input}, std::vector<Tensor>{output}, name) {}
  ModelImpl* operator->() const { return &get(); }
  ModelImpl& get() const;
};

}  // namespace kiln
