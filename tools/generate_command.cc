// `kiln generate`: samples text from a character language model trained by `kiln train --model
// lstm|gru|transformer --save-weights W` (W and W.json).
#include <iostream>

#include "kiln/kiln.h"
#include "tools/char_lm.h"
#include "tools/commands.h"

namespace kiln::tools {
namespace {

struct GenerateArgs {
  std::string weights, prompt;
  int64_t length = 200;
  double temperature = 1.0;
  uint64_t seed = 0;
};

void run_generate(const GenerateArgs& a) {
  CharLmConfig config = load_char_lm_config(a.weights);
  clear_session();
  Model model = build_char_lm(config);
  model->load_weights(a.weights);
  std::cout << a.prompt << generate_text(model, config, a.prompt, a.length, a.temperature, a.seed)
            << "\n";
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "sample text from a character language model");
  cmd->add_option("--load-weights", args->weights,
                  "weights saved by kiln train --model lstm|gru|transformer (its .json "
                  "description must be beside it)")
      ->required();
  cmd->add_option("--prompt", args->prompt,
                  "the text to continue (characters of the training text)")
      ->required();
  cmd->add_option("--length", args->length, "characters to generate")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", args->temperature,
                  "sampling temperature (0: always the most likely character)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "sampling seed")->capture_default_str();
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace kiln::tools
