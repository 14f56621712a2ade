// The conventions the `kiln` and `kiln-opt` programs share (those of git, cargo and clang):
//   - help (`-h`, `--help`, on every subcommand) lists every option with its help text and, for
//     an option that takes a value, its default: "[default: 20]", or "[default: none]" when
//     leaving it out means "not done" (no file written);
//   - `--help` and `--version` print on stdout and exit 0;
//   - a usage error (unknown option or subcommand, a bad or missing value, a missing required
//     option, options that exclude each other) prints "PROGRAM: error: MESSAGE" and a hint
//     "Run 'PROGRAM [SUBCOMMAND] --help' for more information." on stderr and exits 2;
//   - a runtime failure (kiln::Error, any other std::exception such as a std::filesystem error,
//     or anything else thrown) prints "PROGRAM: error: MESSAGE" on stderr and exits 1.
// Depends on CLI11 and the standard library only, so kiln-opt (no frontend) uses it too.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>

namespace kiln::tools {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// The help formatter ("[default: X]" after each description) and default capture for every
// option added afterwards (subcommands inherit both). Call before adding options.
void apply_cli_conventions(CLI::App& app);

// Parses argv (running the selected subcommands' callbacks), then `after_parse`; returns the exit
// code, having printed any error as above. `program` names the program in messages.
int run_cli(CLI::App& app, std::string_view program, int argc, char** argv,
            const std::function<void()>& after_parse = {});

// A usage error found after parsing (options that do not go together): exit code 2 under run_cli.
[[noreturn]] void throw_usage_error(const std::string& message);

}  // namespace kiln::tools
