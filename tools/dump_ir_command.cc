// `kiln dump-ir`: prints the training step of the MLP or CNN (forward, loss, gradients, Adam
// updates, with the variable registry), or the graph of an IR file, as traced or as compiled:
// optimized (fusion groups, then the node and kernel counts, the executable's arena and the
// compile times as `#` comments), the executable's memory plan, or its kernels' LLVM IR or
// assembly; graphs in IR text or Graphviz DOT. Every compiled stage is read from one
// kiln::CompiledForm, the object the executable runs from.
#include <fmt/format.h>

#include <functional>
#include <iostream>

#include "kiln/ir/dot.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/kiln.h"
#include "tools/cli_conventions.h"
#include "tools/commands.h"
#include "tools/model_zoo.h"

namespace kiln::tools {
namespace {

struct DumpIrArgs {
  std::string file, model = "mlp", stage = "traced", format = "text";
  int64_t batch_size = 64;
  bool batch_size_given = false;
};

// The digits data set's shapes: 8x8 images, 10 classes.
constexpr int64_t kDigitsSide = 8, kDigitsClasses = 10;

// The argument types of an IR file's graph: unknown dimensions become the batch size if one
// was given, else a kiln::Error saying so.
std::vector<TensorType> file_argument_types(const ir::Graph& g, const DumpIrArgs& a) {
  std::vector<TensorType> types = g.parameter_types();
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i].shape.is_fully_known()) continue;
    if (!a.batch_size_given)
      throw Error(fmt::format(
          "{}: parameter %{} of @{} is {}; compiling needs every dimension: give --batch-size B "
          "to use B for its unknown (?) dimensions",
          a.file, i, g.name(), types[i].to_string()));
    std::vector<int64_t> dims(types[i].shape.dims().begin(), types[i].shape.dims().end());
    for (int64_t& d : dims)
      if (d == kUnknownDim) d = a.batch_size;
    types[i].shape = Shape(dims);
  }
  return types;
}

void print_stage(const DumpIrArgs& a, const ir::Graph& traced,
                 const std::function<CompiledForm()>& compile) {
  if (a.stage == "traced") {
    std::cout << (a.format == "dot" ? ir::graph_to_dot(traced) : ir::print_graph(traced));
    return;
  }
  CompiledForm form = compile();
  if (a.stage == "llvm" || a.stage == "asm") {
    for (size_t i = 0; i < form.kernels().size(); ++i)
      std::cout << (a.stage == "llvm" ? form.kernel_llvm_ir(i) : form.kernel_assembly(i)) << "\n";
    return;
  }
  if (a.stage == "memory") {
    std::cout << form.memory_plan_text();
    return;
  }
  const ir::Graph& g = form.graph(parse_stage(a.stage));
  if (a.format == "dot") {
    std::cout << ir::graph_to_dot(g);
    return;
  }
  std::cout << ir::print_graph(g);
  if (a.stage == "optimized") std::cout << form.summary();
}

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
  CLI::App* cmd = app.add_subcommand(
      "dump-ir", "print a model's training step or an IR file at a stage of its compilation");
  cmd->add_option("file", args->file,
                  "an IR file (.kir, the format of docs/ir.md) to print instead of a model's "
                  "training step");
  cmd->add_option("--model", args->model, "mlp or cnn (digits shapes)")
      ->check(CLI::IsMember({"mlp", "cnn"}));
  cmd->add_option("--stage", args->stage,
                  "traced: the graph as recorded; specialized: with the argument shapes fixed "
                  "(the optimizer's input); optimized: after the optimize pipeline "
                  "(simplification, fusion), with counts, the arena summary and compile times; "
                  "memory: the executable's memory plan (each value's offset and lifetime, the "
                  "scratch area); llvm: the O3 LLVM IR of every kernel (named after its fusion "
                  "group); asm: their assembly")
      ->check(CLI::IsMember({"traced", "specialized", "optimized", "memory", "llvm", "asm"}));
  cmd->add_option("--batch-size", args->batch_size,
                  "the model's batch; for an IR file: the size given to its parameters' "
                  "unknown (?) dimensions")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--format", args->format, "text (kiln IR) or dot (Graphviz)")
      ->check(CLI::IsMember({"text", "dot"}));
  cmd->callback([args, cmd] {
    args->batch_size_given = cmd->count("--batch-size") > 0;
    if (!args->file.empty()) {
      if (cmd->count("--model") > 0)
        throw_usage_error(
            fmt::format("give an IR file ({}) or --model {}, not both", args->file, args->model));
      std::shared_ptr<const ir::Graph> g = ir::parse_graph_file(args->file);
      ir::verify_graph(*g);
      print_stage(*args, *g, [&] {
        return CompiledForm::compile(g, file_argument_types(*g, *args),
                                     passes::PipelineOptions::from_environment());
      });
      return;
    }
    ConcreteFunction step = traced_train_step(args->model, args->batch_size);
    print_stage(*args, step.graph(), [&] { return step.compiled_form(); });
  });
}

}  // namespace kiln::tools
