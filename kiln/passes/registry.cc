#include <fmt/format.h>

#include "kiln/passes/passes.h"

namespace kiln::passes {
namespace {

struct Entry {
  std::string_view name;
  std::unique_ptr<Pass> (*make)();
};

// Sorted by name. constexpr: initialized before any dynamic initializer runs, so that code
// running at static initialization (benchmark registration) sees the names.
constexpr Entry kPasses[] = {
    {"algebraic-simplify", [] { return make_algebraic_simplify(); }},
    {"constant-fold", [] { return make_constant_fold(); }},
    {"cse", [] { return make_cse(); }},
    {"dce", [] { return make_dce(); }},
    {"fusion", [] { return make_fusion(); }},
    {"hoist-loop-transposes", [] { return make_hoist_loop_transposes(); }},
    {"lower-assignments", [] { return make_lower_assignments(); }},
    {"refine-shapes", [] { return make_refine_shapes(); }},
    {"schedule-collectives", [] { return make_schedule_collectives(); }},
    {"schedule-last-uses", [] { return make_schedule_last_uses(); }},
    {"split-reductions", [] { return make_split_reductions(); }},
    {"transpose-folding", [] { return make_transpose_folding(); }},
};

}  // namespace

std::vector<std::string_view> registered_pass_names() {
  std::vector<std::string_view> names;
  for (const Entry& e : kPasses) names.push_back(e.name);
  return names;
}

std::string registered_pass_list() {
  return fmt::format("{}", fmt::join(registered_pass_names(), ", "));
}

std::unique_ptr<Pass> create_pass(std::string_view name) {
  for (const Entry& e : kPasses)
    if (e.name == name) return e.make();
  throw Error(fmt::format("unknown pass \"{}\" (known passes: {})", name, registered_pass_list()));
}

}  // namespace kiln::passes
