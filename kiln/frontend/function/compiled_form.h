// CompiledForm: the one compilation result of a traced graph for one set of argument types.
// The executable that runs and every view of the compilation read this object: its IR at each
// stage (traced, specialised to the argument shapes, optimized), each kernel's LLVM IR and
// assembly, the memory layout the executable allocates (its arena size, each value's offset
// and lifetime, the planner's lower bound) and compile statistics. ConcreteFunction keeps one
// per argument shapes and runs its executable; KILN_DUMP_IR, `kiln dump-ir` and
// ConcreteFunction::compiled_form() print from it. Copies share one result (immutable).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/codegen/compile_driver.h"
#include "kiln/codegen/memory_plan.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/pipeline.h"
#include "kiln/runtime/executable.h"

namespace kiln {

struct StepTiming;  // frontend/function/report.h

// A stage of the IR of a compiled function.
enum class Stage {
  kTraced,       // as recorded (unknown dimensions of the signature stay unknown)
  kSpecialized,  // specialised to the argument shapes: the optimize pipeline's input
  kOptimized,    // after passes::optimize_pipeline: what the executable was compiled from
};
const char* stage_name(Stage stage);  // "traced", "specialized", "optimized"
// "traced" / "specialized" / "optimized"; kiln::Error naming the accepted values otherwise.
Stage parse_stage(const std::string& name);

// One kernel of the executable (cond / while bodies included), in compile order.
struct KernelForm {
  std::string name;       // its fusion group (or op) name: profiles, KILN_DUMP_IR file names
  std::string symbol;     // the JIT symbol (kiln_k_<hash of its LLVM IR and target>)
  std::string source;     // "memory cache", "disk cache" or "compiled"
  std::string iteration;  // "flat", "rows" or "serial"
  int64_t extent = 0;     // rows of its parallel dimension
  double lower_seconds = 0, optimize_seconds = 0, emit_seconds = 0;
  double compile_seconds() const { return lower_seconds + optimize_seconds + emit_seconds; }
};

class CompiledForm {
 public:
  CompiledForm() = default;
  // Specialises `traced` to `argument_types` (every dimension known; kiln::Error naming the
  // argument otherwise), optimizes it once with `options` (their dump_dir receives the
  // pipeline's stages) and compiles it.
  static CompiledForm compile(std::shared_ptr<const ir::Graph> traced,
                              const std::vector<TensorType>& argument_types,
                              const passes::PipelineOptions& options);

  bool defined() const { return impl_ != nullptr; }
  const std::vector<TensorType>& argument_types() const;
  const ir::Graph& graph(Stage stage) const;
  // print_graph(graph(stage)): parses back with ir::parse_graph.
  std::string ir_text(Stage stage) const;

  const std::shared_ptr<const runtime::Executable>& executable() const;
  // The executable's arena layout (codegen::ArenaLayout): the plan of the optimized graph's
  // values and the scratch area. arena_bytes() == executable()->arena_bytes().
  const codegen::ArenaLayout& arena_layout() const;
  const codegen::MemoryPlan& memory_plan() const { return arena_layout().plan; }
  size_t arena_bytes() const { return arena_layout().arena_bytes; }
  // arena_layout().to_text(graph(kOptimized)).
  std::string memory_plan_text() const;

  const std::vector<KernelForm>& kernels() const;
  // The i-th kernel's O3 LLVM IR / assembly (lowered and optimized afresh, as deterministic
  // as the compile: the same symbol); kiln::Error if i is out of range.
  std::string kernel_llvm_ir(size_t i) const;
  std::string kernel_assembly(size_t i) const;
  // One line per kernel: name, source, iteration, extent, compile milliseconds.
  std::string kernels_table() const;

  const std::vector<passes::PassTiming>& pass_timings() const;
  double optimize_seconds() const;  // specialise + optimize pipeline
  double codegen_seconds() const;   // kernels (lower, caches, O3, link) + executable
  double compile_seconds() const { return optimize_seconds() + codegen_seconds(); }
  // `#` comment lines: node and kernel counts before -> after the pipeline, the arena summary,
  // compile times.
  std::string summary() const;

  // The HTML step report of this form (frontend/function/report.h: graph, memory plan, kernel
  // table), with the measured times of `timing` when given; kiln::Error naming the path when it
  // cannot be written.
  void write_report(const std::string& path, const StepTiming* timing = nullptr) const;

 private:
  struct Impl;
  const Impl& impl() const;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace kiln
