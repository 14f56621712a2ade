// `kiln run FILE.kir`: parses and verifies an IR file, runs it on .npy inputs (--mode compiled:
// specialised to the inputs' shapes, optimized and JIT-compiled; --mode reference: node by
// node with the eager kernels) and writes every output (and every variable the graph
// assigns) as .npy.
//   --input 0=x.npy          graph parameter %0 (also "%0=x.npy")
//   --input dense/kernel=k.npy   the value of a captured variable, by its name
//   --model DIR              variables without an --input from a saved model (its weights and
//                            optimizer state, by variable name; tools/train_model_files.h)
//   outputs: DIR/output_<i>.npy; assigned variables: DIR/<name with '/' as '.'>.npy
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "kiln/codegen/compile_driver.h"
#include "kiln/codegen/object_cache.h"
#include "kiln/codegen/target.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/verifier.h"
#include "kiln/keras/io/npy.h"
#include "kiln/kiln.h"
#include "kiln/runtime/reference_executor.h"
#include "tools/commands.h"
#include "tools/train_model_files.h"

namespace kiln::tools {
namespace {

struct RunArgs {
  std::string file, output_dir = ".", mode = "compiled", model;
  bool cache_stats = false;
  std::vector<std::string> inputs;
};

std::string variable_file_name(std::string name) {
  std::replace(name.begin(), name.end(), '/', '.');
  return name + ".npy";
}

std::string describe_inputs(const ir::Graph& g) {
  std::string s;
  for (size_t i = 0; i < g.parameters().size(); ++i)
    s += fmt::format("\n  {} : {}", i, g.parameter(i)->type().to_string());
  for (const ir::GraphVariable& v : g.variables())
    s += fmt::format("\n  {} : {} (variable)", v.name, v.type.to_string());
  return s;
}

void run(const RunArgs& a) {
  std::unique_ptr<ir::Graph> graph = ir::parse_graph_file(a.file);
  ir::verify_graph(*graph);
  const ir::Graph& g = *graph;
  std::map<std::string, std::string> given;  // name -> npy path
  for (const std::string& spec : a.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw Error(
          fmt::format("--input \"{}\": expected NAME=FILE.npy, where NAME is a parameter "
                      "number (0, %0) or a variable name",
                      spec));
    std::string name = spec.substr(0, eq);
    if (name[0] == '%') name = name.substr(1);
    if (!given.emplace(name, spec.substr(eq + 1)).second)
      throw Error(fmt::format("--input {} is given twice", name));
  }
  std::map<std::string, Tensor> saved;
  if (!a.model.empty()) saved = saved_model_variables(a.model);
  auto take = [&](const std::string& name, const TensorType& want, const std::string& what) {
    auto it = given.find(name);
    Tensor t;
    std::string source;
    if (it != given.end()) {
      t = load_npy(it->second);
      source = it->second;
      given.erase(it);
    } else if (auto s = saved.find(name); s != saved.end() && what.starts_with("variable")) {
      t = s->second;
      source = "the saved model " + a.model;
    } else {
      throw Error(fmt::format(
          "{} of {} ({}) has no --input{}; the graph takes:{}", what, a.file, want.to_string(),
          a.model.empty() ? "" : " and the saved model has no such variable", describe_inputs(g)));
    }
    bool ok = t.dtype() == want.dtype && t.rank() == want.shape.rank();
    for (int d = 0; ok && d < t.rank(); ++d)
      ok = want.shape[d] == kUnknownDim || want.shape[d] == t.shape()[d];
    if (!ok)
      throw Error(fmt::format("{} from {} is {}, but the graph expects {} (? = any size)", what,
                              source, t.type().to_string(), want.to_string()));
    return t.array();
  };
  std::vector<runtime::Array> args, vars;
  for (size_t i = 0; i < g.parameters().size(); ++i)
    args.push_back(
        take(std::to_string(i), g.parameter(i)->type(), fmt::format("parameter %{}", i)));
  for (const ir::GraphVariable& v : g.variables())
    vars.push_back(take(v.name, v.type, fmt::format("variable \"{}\"", v.name)));
  if (!given.empty())
    throw Error(fmt::format("--input {}: the graph has no such parameter or variable; it takes:{}",
                            given.begin()->first, describe_inputs(g)));
  std::vector<runtime::Array> outs;
  if (a.mode == "reference") {
    outs = runtime::execute_reference(g, args, vars);
  } else {
    std::vector<TensorType> types;
    for (const runtime::Array& x : args) types.push_back(x.type());
    codegen::CompiledFunction compiled =
        codegen::compile_function(g, types, passes::PipelineOptions::from_environment());
    outs = compiled.code.executable->run(args, vars);
  }
  if (a.cache_stats) {
    codegen::CacheStats c = codegen::cache_stats();
    std::cout << fmt::format(
        "kernel cache: {} compiled, {} from disk, {} in memory, {} corrupt, {} written (target "
        "{})\n",
        c.misses, c.disk_hits, c.memory_hits, c.corrupt, c.disk_writes, codegen::target_cpu());
  }
  std::filesystem::create_directories(a.output_dir);
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string path = (std::filesystem::path(a.output_dir) / fmt::format("output_{}.npy", i));
    save_npy(path, Tensor(outs[i]));
    std::cout << fmt::format("output {}: {} -> {}\n", i, outs[i].type().to_string(), path);
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!g.variable(i).written) continue;
    std::string path = std::filesystem::path(a.output_dir) / variable_file_name(g.variable(i).name);
    save_npy(path, Tensor(vars[i]));
    std::cout << fmt::format("variable \"{}\": {} -> {}\n", g.variable(i).name,
                             vars[i].type().to_string(), path);
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd =
      app.add_subcommand("run", "run an IR file on .npy inputs (compiled or reference executor)");
  cmd->add_option("file", args->file, "the .kir file")->required();
  cmd->add_option("--input", args->inputs,
                  "NAME=FILE.npy (NAME: parameter number or variable); repeat for each input")
      ->default_str("none");
  cmd->add_option("--model", args->model,
                  "a saved model directory (kiln train --save-model): the graph's variables "
                  "without an --input take its values, by name")
      ->default_str("none");
  cmd->add_option("--output-dir", args->output_dir, "where outputs are written (created)");
  cmd->add_option("--mode", args->mode,
                  "compiled (optimized and JIT-compiled for the inputs' shapes) or reference "
                  "(node by node with the eager kernels)")
      ->check(CLI::IsMember({"compiled", "reference"}));
  cmd->add_flag("--cache-stats", args->cache_stats,
                "print the kernel cache's counters (compiled, disk hits, ...) at the end");
  cmd->callback([args] { run(*args); });
}

}  // namespace kiln::tools
