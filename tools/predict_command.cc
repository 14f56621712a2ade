// `kiln predict`: loads weights saved by `kiln train`, runs the model on an .npy input and
// writes the logits as .npy.
#include <iostream>

#include "kiln/keras/io/npy.h"
#include "kiln/kiln.h"
#include "tools/commands.h"
#include "tools/model_zoo.h"

namespace kiln::tools {
namespace {

struct PredictArgs {
  std::string model = "mlp", weights, input, output;
};

void run_predict(const PredictArgs& a) {
  Tensor x = prepare_inputs(a.model, load_npy(a.input));
  Shape example(std::span<const int64_t>(x.shape().begin() + 1, x.shape().end()));
  Sequential model = build_model(a.model, example, 10);
  model->load_weights(a.weights);
  Tensor logits = model->predict(x, {.batch_size = 256});
  save_npy(a.output, logits);
  std::cout << "wrote logits " << logits.shape().to_string() << " to " << a.output << "\n";
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto args = std::make_shared<PredictArgs>();
  CLI::App* cmd = app.add_subcommand("predict", "write a trained model's logits for an input");
  cmd->add_option("--model", args->model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}));
  cmd->add_option("--load-weights", args->weights, "weights saved by kiln train")->required();
  cmd->add_option("--input", args->input, "examples as .npy, (N, ...)")->required();
  cmd->add_option("--output", args->output, "where to write the logits (.npy)")->required();
  cmd->callback([args] { run_predict(*args); });
}

}  // namespace kiln::tools
