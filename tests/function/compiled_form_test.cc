// kiln::CompiledForm, the one compilation result: the arena it reports is the arena the
// executable allocates, the executable that runs is the form's, every IR stage parses back,
// kernels have their LLVM IR and assembly under the same symbol, and KILN_DUMP_IR writes the
// same texts (the trace itself is not optimized a second time for the dump).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;

// A small training step: Dense + softmax cross-entropy + SGD (matmul contractions, fused
// elementwise chains, reductions, variable updates).
struct Step {
  Dense layer{8};
  Optimizer opt = SGD({.learning_rate = 0.1});
  Function<std::function<Tensor(const Tensor&, const Tensor&)>> fn;
  Step()
      : fn(function(
            std::function<Tensor(const Tensor&, const Tensor&)>(
                [this](const Tensor& x, const Tensor& y) {
                  GradientTape tape;
                  Tensor loss = mean(square(relu(layer(x)) - y));
                  std::vector<Variable> vars = layer->trainable_weights();
                  opt->apply_gradients(tape.gradient(loss, vars), vars);
                  return loss;
                }),
            {.name = "step", .input_signature = std::vector<TensorSpec>{{{-1, 16}}, {{-1, 8}}}})) {}
};

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CompiledForm, ArenaIsWhatTheExecutableAllocates) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  Step step;
  Tensor x = random_normal({32, 16}, 1), y = random_normal({32, 8}, 2);
  ConcreteFunction cf = step.fn.concrete(x, y);
  CompiledForm form = cf.compiled_form({x, y});
  const runtime::Executable& exe = *form.executable();
  EXPECT_EQ(exe.arena_allocations().arenas, 0);  // nothing ran yet
  step.fn(x, y);
  step.fn(x, y);
  // The call ran the form's executable: compiled once, and its arena pool allocated exactly
  // one arena of the form's size (the second call reused it).
  EXPECT_EQ(cf.compile_stats().executables, 1);
  EXPECT_EQ(cf.compiled_form({x, y}).executable().get(), &exe);
  EXPECT_EQ(exe.arena_allocations().arenas, 1);
  EXPECT_EQ(exe.arena_allocations().bytes, form.arena_bytes());
  EXPECT_EQ(exe.arena_bytes(), form.arena_bytes());

  // The layout is consistent: planned values below the scratch area, scratch buffers inside
  // the arena, the planner's lower bound below its arena.
  const codegen::ArenaLayout& a = form.arena_layout();
  EXPECT_GT(a.arena_bytes, 0u);
  EXPECT_LE(a.plan.lower_bound_bytes, a.plan.arena_bytes);
  EXPECT_LE(a.plan.arena_bytes, a.scratch_offset);
  EXPECT_FALSE(a.scratch.empty());  // the matmuls' products
  for (const codegen::ValuePlan& v : a.plan.values) {
    EXPECT_EQ(v.reuses_buffer_of, nullptr);  // kernel buffers never alias
    if (v.in_arena()) {
      EXPECT_LE(v.offset + v.size, a.scratch_offset);
    }
  }
  for (const codegen::ScratchBuffer& b : a.scratch)
    EXPECT_LE(b.offset + size_t(b.type.shape.num_elements()) * dtype_size(b.type.dtype),
              a.arena_bytes);
  std::string text = form.memory_plan_text();
  EXPECT_NE(text.find(fmt::format("# arena {}", codegen::format_bytes(a.arena_bytes))),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("scratch contraction product of fused_matmul"), std::string::npos) << text;
}

TEST(CompiledForm, EveryStageParsesBack) {
  Step step;
  Tensor x = random_normal({4, 16}, 1), y = random_normal({4, 8}, 2);
  ConcreteFunction cf = step.fn.concrete(x, y);
  CompiledForm form = cf.compiled_form({x, y});
  for (Stage s : {Stage::kTraced, Stage::kSpecialized, Stage::kOptimized}) {
    std::string text = form.ir_text(s);
    std::unique_ptr<ir::Graph> g = ir::parse_graph(text, stage_name(s));
    ir::verify_graph(*g);
    EXPECT_EQ(ir::print_graph(*g), text) << stage_name(s);
  }
  EXPECT_NE(form.ir_text(Stage::kTraced).find("f32[?,16]"), std::string::npos);
  EXPECT_EQ(form.ir_text(Stage::kSpecialized).find('?'), std::string::npos);
  EXPECT_NE(form.ir_text(Stage::kSpecialized).find("f32[4,16]"), std::string::npos);
  EXPECT_NE(form.ir_text(Stage::kOptimized).find("= fusion("), std::string::npos);
  EXPECT_EQ(cf.ir_text(), form.ir_text(Stage::kTraced));
  EXPECT_EQ(&form.graph(Stage::kTraced), &cf.graph());
  // The signature has an unknown batch: the stages after tracing need argument shapes.
  EXPECT_NE(error_of([&] { cf.ir_text(Stage::kOptimized); }).find("compiled_form(args)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { cf.compiled_form(cf.input_types()); }).find("every dimension known"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              cf.compiled_form(std::vector<TensorType>{x.type(), x.type()});
            }).find("argument 1 must be f32[?,8]"),
            std::string::npos);
}

TEST(CompiledForm, KernelsHaveTheirCodeAndCompileStatistics) {
  Step step;
  Tensor x = random_normal({4, 16}, 1), y = random_normal({4, 8}, 2);
  CompiledForm form = step.fn.concrete(x, y).compiled_form({x, y});
  ASSERT_FALSE(form.kernels().empty());
  for (size_t i = 0; i < form.kernels().size(); ++i) {
    const KernelForm& k = form.kernels()[i];
    EXPECT_TRUE(k.source == "compiled" || k.source == "disk cache" || k.source == "memory cache")
        << k.source;
    EXPECT_GE(k.compile_seconds(), 0.0);
    EXPECT_GT(k.lower_seconds, 0.0);
    if (k.source != "compiled") {
      EXPECT_EQ(k.optimize_seconds + k.emit_seconds, 0.0);
    }
    std::string ll = form.kernel_llvm_ir(i), s = form.kernel_assembly(i);
    EXPECT_NE(ll.find("; kernel " + k.name + " (symbol " + k.symbol), std::string::npos) << ll;
    EXPECT_NE(ll.find("define void @" + k.symbol + "("), std::string::npos) << ll;
    EXPECT_NE(s.find(k.symbol + ":"), std::string::npos) << s;
    EXPECT_NE(form.kernels_table().find(k.name), std::string::npos);
  }
  EXPECT_NE(error_of([&] { form.kernel_llvm_ir(form.kernels().size()); }).find("does not exist"),
            std::string::npos);
  EXPECT_GT(form.compile_seconds(), 0.0);
  EXPECT_NE(form.summary().find("# nodes "), std::string::npos);
}

TEST(CompiledForm, DumpIrWritesTheCompiledFormOnce) {
  ScopedExecutionMode mode(ExecutionMode::kCompiled);
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("kiln_compiled_form_{}", ::getpid());
  std::filesystem::remove_all(dir);
  ::setenv("KILN_DUMP_IR", dir.c_str(), 1);
  Step step;
  Tensor x = random_normal({4, 16}, 1), y = random_normal({4, 8}, 2);
  step.fn(x, y);
  ::unsetenv("KILN_DUMP_IR");
  CompiledForm form = step.fn.concrete(x, y).compiled_form({x, y});
  std::vector<std::filesystem::path> traced, compiled;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    (e.path().filename().string().find(".compiled.") != std::string::npos ? compiled : traced)
        .push_back(e.path());
  ASSERT_EQ(traced.size(), 1u);
  ASSERT_EQ(compiled.size(), 1u);
  // The trace's directory holds the traced graph only: nothing was optimized for the dump.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(traced[0]))
    files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"traced.kir"});
  EXPECT_EQ(read_text(traced[0] / "traced.kir"), form.ir_text(Stage::kTraced));
  // The compiled directory: exactly what the executable was built from.
  EXPECT_EQ(read_text(compiled[0] / "000.input.kir"), form.ir_text(Stage::kSpecialized));
  EXPECT_EQ(read_text(compiled[0] / "optimized.kir"), form.ir_text(Stage::kOptimized));
  EXPECT_EQ(read_text(compiled[0] / "memory_plan.txt"), form.memory_plan_text());
  size_t k = 0;  // a kernel named after its fusion group (other names may be sanitised)
  while (k < form.kernels().size() && form.kernels()[k].name.rfind("fused_", 0) != 0) ++k;
  ASSERT_LT(k, form.kernels().size());
  EXPECT_EQ(read_text(compiled[0] / "kernels" / (form.kernels()[k].name + ".ll")),
            form.kernel_llvm_ir(k));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
