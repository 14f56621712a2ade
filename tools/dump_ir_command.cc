// `kiln dump-ir`: prints the training step of the MLP or CNN (forward, loss, gradients, Adam
// updates, with the variable registry) as traced or optimized (fusion groups, then the node
// and kernel counts and the memory plan as `#` comments), in IR text or Graphviz DOT.
#include <fmt/format.h>

#include <iostream>

#include "codegen/compile_graph.h"
#include "ir/dot.h"
#include "ir/printer.h"
#include "kiln/kiln.h"
#include "passes/optimize.h"
#include "tools/commands.h"
#include "tools/model_zoo.h"

namespace kiln::tools {
namespace {

struct DumpIrArgs {
  std::string model = "mlp", stage = "traced", format = "text";
  int64_t batch_size = 64;
};

// The digits data set's shapes: 8x8 images, 10 classes.
constexpr int64_t kDigitsSide = 8, kDigitsClasses = 10;

}  // namespace

ConcreteFunction traced_train_step(const std::string& model_kind, int64_t batch_size) {
  set_random_seed(0);
  Tensor x = prepare_inputs(model_kind, zeros({batch_size, kDigitsSide * kDigitsSide}));
  Tensor y = zeros({batch_size}, DType::i64);
  Shape example(std::span<const int64_t>(x.shape().begin() + 1, x.shape().end()));
  Sequential model = build_model(model_kind, example, kDigitsClasses);
  model->compile({.optimizer = Adam(),
                  .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                  .metrics = {"accuracy"}});
  return model->train_step_function(x, y);
}

void add_dump_ir_command(CLI::App& app) {
  auto args = std::make_shared<DumpIrArgs>();
  CLI::App* cmd =
      app.add_subcommand("dump-ir", "print the traced training step of a model as IR text or DOT");
  cmd->add_option("--model", args->model, "mlp or cnn (digits shapes)")
      ->check(CLI::IsMember({"mlp", "cnn"}));
  cmd->add_option("--stage", args->stage,
                  "traced: the graph as recorded; optimized: after the optimize pipeline "
                  "(simplification, fusion), with the memory plan summary; llvm: the O3 "
                  "LLVM IR of every kernel (named after its fusion group); asm: their assembly")
      ->check(CLI::IsMember({"traced", "optimized", "llvm", "asm"}));
  cmd->add_option("--batch-size", args->batch_size)->check(CLI::PositiveNumber);
  cmd->add_option("--format", args->format, "text (kiln IR) or dot (Graphviz)")
      ->check(CLI::IsMember({"text", "dot"}));
  cmd->callback([args] {
    ConcreteFunction step = traced_train_step(args->model, args->batch_size);
    const ir::Graph* graph = &step.graph();
    std::optional<passes::OptimizedGraph> optimized;
    if (args->stage == "llvm" || args->stage == "asm") {
      std::vector<TensorType> types = step.graph().parameter_types();
      codegen::CompiledFunction compiled = codegen::compile_function(
          step.graph(), types, passes::PipelineOptions::from_environment());
      std::vector<std::unique_ptr<ir::Graph>> owned;
      for (const codegen::KernelRequest& r : codegen::kernel_requests(*compiled.optimized, owned))
        std::cout << (args->stage == "llvm" ? codegen::kernel_llvm_ir(r)
                                            : codegen::kernel_assembly(r))
                  << "\n";
      return;
    }
    if (args->stage == "optimized") {
      optimized = passes::optimize_copy(step.graph(), passes::PipelineOptions::from_environment());
      graph = optimized->graph.get();
    }
    if (args->format == "dot") {
      std::cout << ir::graph_to_dot(*graph);
      return;
    }
    std::cout << ir::print_graph(*graph);
    if (optimized) std::cout << optimized->summary();
  });
}

}  // namespace kiln::tools
