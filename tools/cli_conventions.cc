#include "tools/cli_conventions.h"

#include <iostream>

namespace kiln::tools {
namespace {

// CLI11's formatter, with the default moved from the option column ("INT=20") to the end of
// the description ("[default: 20]"), and "[default: none]" for a value option left unset.
class DefaultsFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string s = CLI::Formatter::make_option_opts(opt);
    const std::string shown = "=" + opt->get_default_str();
    if (size_t pos = s.find(shown); !opt->get_default_str().empty() && pos != std::string::npos)
      s.erase(pos, shown.size());
    return s;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string s = CLI::Formatter::make_option_desc(opt);
    if (opt->get_expected_max() == 0 || opt->get_required()) return s;  // a flag, or no default
    const std::string& d = opt->get_default_str();
    return s + (s.empty() ? "" : " ") + "[default: " + (d.empty() ? "none" : d) + "]";
  }
};

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

void print_error(std::string_view program, const std::string& message) {
  std::cout.flush();
  std::cerr << program << ": error: " << trimmed(message) << "\n";
}

}  // namespace

void apply_cli_conventions(CLI::App& app) {
  app.formatter(std::make_shared<DefaultsFormatter>());
  app.option_defaults()->always_capture_default();
}

int run_cli(CLI::App& app, std::string_view program, int argc, char** argv,
            const std::function<void()>& after_parse) {
  try {
    try {
      app.parse(argc, argv);
      if (after_parse) after_parse();
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version: stdout, exit 0
      // The hint names the subcommand the error is in.
      std::string command(program);
      for (const CLI::App* a = &app; !a->get_subcommands().empty();) {
        a = a->get_subcommands().front();
        command += " " + a->get_name();
      }
      print_error(program, e.what());
      std::cerr << "Run '" << command << " --help' for more information.\n";
      return kExitUsage;
    }
  } catch (const std::exception& e) {
    print_error(program, e.what());
    return kExitFailure;
  } catch (...) {
    print_error(program, "unknown exception (not derived from std::exception)");
    return kExitFailure;
  }
  return kExitSuccess;
}

void throw_usage_error(const std::string& message) { throw CLI::ValidationError(message); }

}  // namespace kiln::tools
