// `kiln ops`: prints the op table (name, arity, dtypes, bf16 rule, traits, fusion role, codegen,
// rounding class, attributes with the C++ API's defaults) as a Markdown table; docs/ops.md embeds
// its output. `kiln op-api`: the C++ op API generated from the same table (tools/op_api.h).
#include <iostream>
#include <string>

#include "kiln/ir/op_table.h"
#include "tools/commands.h"
#include "tools/op_api.h"

namespace kiln::tools {
namespace {

std::string traits_text(const OpInfo& op) {
  std::string s;
  for (std::string_view n : trait_names(op.traits)) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

}  // namespace

void print_op_table() {
  std::cout << "| op | inputs | dtypes | bf16 | traits | fuses as | codegen | rounding | "
               "attributes |\n"
               "|---|---|---|---|---|---|---|---|---|\n";
  for (const OpInfo& op : all_ops()) {
    std::string attrs;
    for (const AttrSpec& a : op.attrs) {
      attrs += (attrs.empty() ? "" : ", ") + a.name + ": " + std::string(attr_kind_name(a.kind));
      if (a.default_value) attrs += " = " + attr_value_to_string(*a.default_value);
    }
    std::cout << "| `" << op.name << "` | " << (op.arity < 0 ? "1+" : std::to_string(op.arity))
              << " | " << dtype_class_word(op.dtypes) << " | " << bf16_rule_word(op.bf16) << " | "
              << traits_text(op) << " | " << fusion_role_name(op.fusion) << " | "
              << (op.generated() ? "generated" : "runtime kernel") << " | "
              << rounding_class_word(op.rounding) << " | " << attrs << " |\n";
  }
}

void add_ops_command(CLI::App& app) {
  app.add_subcommand("ops", "print the op table as Markdown")->callback([] { print_op_table(); });
}

void add_op_api_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "op-api",
      "print the C++ op API generated from the op table (kiln/frontend/ops_generated.h or .cc; "
      "scripts/gen-op-api.sh writes them), or the list of ops whose C++ API is written by hand");
  static std::string part = "list";
  cmd->add_option("part", part, "header, source or list")
      ->check(CLI::IsMember({"header", "source", "list"}))
      ->capture_default_str();
  cmd->callback([] {
    if (part == "header")
      std::cout << op_api_header();
    else if (part == "source")
      std::cout << op_api_source();
    else
      std::cout << op_api_list();
  });
}

}  // namespace kiln::tools
