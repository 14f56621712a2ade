// PassPipeline: runs passes over a graph in a fixed order, with fixed-point groups, pass
// disabling, verification, timings and IR dumps. The default pipeline is one readable
// function, default_pipeline() at the end of this header.
//
// Contract:
//   - Stages run in the order they were added. A single pass runs once; a fixed-point group
//     runs its passes in order, again and again, until one whole round changes nothing. A
//     group still changing the graph after `max_iterations` rounds is a kiln::Error naming
//     the group and the passes that changed the graph in the last round.
//   - A disabled pass (PipelineOptions::disabled) is skipped everywhere: not run, not timed,
//     not dumped. Disabling a name that is neither a registered pass (passes/passes.h) nor a
//     pass of this pipeline is a kiln::Error listing the known passes.
//   - With PipelineOptions::verify, ir::verify_graph checks the input graph (a failure is
//     "the pipeline's input graph is invalid: ...") and the graph after every pass run that
//     changed it (a failure is `pass "cse" produced an invalid graph: <verifier message>`).
//   - A kiln::Error thrown by a pass comes out as `pass "cse" failed: <message>`.
//   - With a dump directory, run() writes `000.input.kir` (always), then
//     `NNN.after.<pass>.kir` after every run of a pass that changed the graph and whose name
//     matches the dump filter; NNN counts up from 000 in each run() (files of an earlier run
//     with the same numbers are replaced). An unchanged run writes nothing: its graph is the
//     previous file's. Files are written to a temporary name and renamed into place.
//   - timings() accumulate over every run() of this pipeline, and so do the passes' statistics
//     (Pass::statistics(): each run's counters are added to PassTiming::statistics).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/passes/pass.h"

namespace kiln::passes {

struct PipelineOptions {
  // Verify the input and the graph after every pass that changed it. Default: on in debug
  // builds (NDEBUG undefined), off otherwise; KILN_VERIFY=0|1 overrides it in
  // from_environment().
  bool verify = verify_by_default();
  // Names of passes to skip (KILN_DISABLE_PASSES=a,b).
  std::set<std::string, std::less<>> disabled;
  // Where to write IR dumps; empty: no dumps (KILN_DUMP_IR=DIR). Created if missing.
  std::string dump_dir;
  // ECMAScript regex searched in pass names: which passes are dumped; empty: all
  // (KILN_DUMP_PASSES=REGEX). The input is always dumped.
  std::string dump_filter;

  // The defaults above, with every pipeline knob of runtime/knobs.h applied.
  static PipelineOptions from_environment();
  static bool verify_by_default();
};

// What one pass cost, and what it did, over every run() of a pipeline.
struct PassTiming {
  std::string name;
  int64_t runs = 0;     // times the pass ran
  int64_t changed = 0;  // runs that changed the graph
  int64_t total_us = 0;
  PassStatistics statistics;  // the pass's counters, summed over its runs
};

class PassPipeline {
 public:
  static constexpr int kDefaultMaxIterations = 32;

  explicit PassPipeline(PipelineOptions options = {});
  PassPipeline(PassPipeline&&) noexcept;
  PassPipeline& operator=(PassPipeline&&) noexcept;
  ~PassPipeline();

  // Appends one pass, run once.
  PassPipeline& add(std::unique_ptr<Pass> pass);
  // Appends a group of passes repeated until a whole round changes nothing (see above).
  PassPipeline& add_fixed_point(std::string group, std::vector<std::unique_ptr<Pass>> passes,
                                int max_iterations = kDefaultMaxIterations);

  // Runs every stage on `g`; returns whether anything changed. Errors are kiln::Error.
  bool run(ir::Graph& g);

  // Per pass, in the order the passes first appear in the pipeline (only passes that ran).
  const std::vector<PassTiming>& timings() const { return timings_; }
  // timings() as an aligned text table with a total row, ending in a newline.
  std::string timings_table() const;
  // Every pass's statistics, one line per counter under the pass's name, in timings() order:
  //   cse
  //     nodes merged                3
  // A pass that counted nothing reads "  (nothing counted)". Ends in a newline.
  std::string statistics_table() const;
  // The names of the pipeline's passes in stage order (a pass in several stages once).
  std::vector<std::string> pass_names() const;
  const PipelineOptions& options() const { return options_; }

 private:
  struct Stage;
  struct RunState;
  bool run_pass(Pass& pass, RunState& state);
  bool run_fixed_point(Stage& stage, RunState& state);
  void check_disabled_names() const;
  PassTiming& timing_of(std::string_view name);

  PipelineOptions options_;
  std::vector<Stage> stages_;
  std::vector<PassTiming> timings_;
};

// Builds a vector of passes in one expression: pass_list(make_cse(), make_dce()).
template <typename... P>
std::vector<std::unique_ptr<Pass>> pass_list(P&&... passes) {
  std::vector<std::unique_ptr<Pass>> v;
  (v.push_back(std::forward<P>(passes)), ...);
  return v;
}

// kiln's default graph optimization:
//   the fixed point "simplify" of {algebraic-simplify, constant-fold, cse, dce}. Every pass in it
//   is an exact rewrite (bitwise-equal results; the property test checks this). transpose-folding
//   is not in it: the GEMM's summation order depends on the operand layout, so folding can change
//   results by an ulp (use --passes or add it). refine-shapes runs where a signature is specialised
//   (specialize_parameters); traced graphs already carry every dimension their signature fixes.
PassPipeline default_pipeline(const PipelineOptions& options);

// kiln's optimization for compilation: default_pipeline's fixed point "simplify", then
// hoist-loop-transposes (loop-invariant transposed GEMM operands made once before the loop),
// lower-assignments (assign_add / assign_sub become add / sub + assign), fusion (groups
// that run as one kernel, passes/fusion.h) and schedule-collectives (each all_reduce right
// after its input's producer, so it overlaps the rest of the step), each once. The result is
// what codegen compiles; it is not a fixed point of simplify any more (fusion bodies are not
// simplified again).
PassPipeline optimize_pipeline(const PipelineOptions& options);

// statistics_table() of any list of timings (those a compilation kept, say).
std::string statistics_table(const std::vector<PassTiming>& timings);

}  // namespace kiln::passes
