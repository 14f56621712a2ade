// Subcommands of the `kiln` program; each registers its options on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace kiln::tools {

// `kiln demo`: a short eager session (ops, broadcasting, a gradient tape), printed.
void add_demo_command(CLI::App& app);
void run_demo();

// `kiln ops`: the op table as a Markdown table.
void add_ops_command(CLI::App& app);
void print_op_table();

// `kiln train`: train the MLP or CNN on digits or MNIST.
void add_train_command(CLI::App& app);
// `kiln predict`: logits of a trained model for an .npy input.
void add_predict_command(CLI::App& app);

}  // namespace kiln::tools
