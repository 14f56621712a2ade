// Subcommands of the `kiln` program; each registers its options on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kiln/frontend/function/concrete_function.h"

namespace kiln::tools {

// `kiln demo`: a short eager demo (ops, broadcasting, a gradient tape), printed.
void add_demo_command(CLI::App& app);
void run_demo();

// `kiln ops`: the op table as a Markdown table.
void add_ops_command(CLI::App& app);
void print_op_table();
// `kiln op-api header|source|list`: the C++ op API generated from the op table (tools/op_api.h).
void add_op_api_command(CLI::App& app);

// `kiln train`: train the MLP or CNN on digits or MNIST, or a character language model.
void add_train_command(CLI::App& app);
// `kiln dump-ir`: the traced training step of the MLP or CNN as IR text or DOT.
void add_dump_ir_command(CLI::App& app);
// `kiln report`: the HTML step report of a model's training step (tools/report_command.cc).
void add_report_command(CLI::App& app);
// `kiln run`: run an IR file on .npy inputs, write the outputs as .npy.
void add_run_command(CLI::App& app);
// `kiln bench`: runs the `kiln-bench` program beside `kiln` with the arguments that follow
// (tools/bench_forward.cc), so that building `kiln` does not build the benchmark workloads.
void add_bench_command(CLI::App& app);
// The options and the run of `kiln-bench` (tools/bench_main.cc): eager vs compiled vs
// hand-written C++ on the bench/suite/suite.h workloads, on `cmd` itself.
void add_bench_options(CLI::App& cmd);
// `kiln predict`: logits of a trained model for an .npy input.
void add_predict_command(CLI::App& app);
// `kiln generate`: text sampled from a trained character language model.
void add_generate_command(CLI::App& app);
// `kiln gemm-plan M K N [--ta] [--tb]`: the float32 GEMM engine's plan for one product.
void add_gemm_plan_command(CLI::App& app);
// `kiln tune`: measures and keeps the machine's GEMM blocking (runtime/gemm_tuner.h).
void add_tune_command(CLI::App& app);

// The traced training step (Adam, sparse softmax cross-entropy) of the "mlp" or "cnn" model on
// digits-shaped batches of `batch_size`.
ConcreteFunction traced_train_step(const std::string& model_kind, int64_t batch_size);

}  // namespace kiln::tools
