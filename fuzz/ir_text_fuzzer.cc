// libFuzzer harness of the IR text reader: ir::parse_graph on arbitrary bytes, then, on what
// parses, the printer round trip (print(parse(print(g))) == print(g)), the verifier and, on
// what verifies, the optimize pipeline (with verification after every pass) and a round trip
// of its result. Findings: sanitizer reports, escaping exceptions other than kiln::Error,
// internal errors, a failed round trip, and a pass that breaks a verified graph.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/pipeline.h"

namespace {

using kiln::Error;
using kiln::fuzz::check_expected_error;
using kiln::fuzz::finding;

// print(g) must parse back to a graph that prints the same.
void check_round_trip(const kiln::ir::Graph& g, const char* stage) {
  std::string printed = kiln::ir::print_graph(g);
  std::unique_ptr<kiln::ir::Graph> again;
  try {
    again = kiln::ir::parse_graph(printed, "<printed>");
  } catch (const Error& e) {
    finding(stage, std::string("the printed graph does not parse: ") + e.what() + "\n" + printed);
  }
  std::string reprinted = kiln::ir::print_graph(*again);
  if (reprinted != printed) finding(stage, "print(parse(print(g))) != print(g):\n" + printed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<kiln::ir::Graph> g;
  try {
    g = kiln::ir::parse_graph(text, "<fuzz>");
  } catch (const Error& e) {
    check_expected_error(e);
    return 0;
  }
  check_round_trip(*g, "parsed graph");
  try {
    kiln::ir::verify_graph(*g);
  } catch (const Error& e) {
    check_expected_error(e);
    return 0;
  }
  kiln::passes::PipelineOptions options;
  options.verify = true;
  try {
    kiln::passes::optimize_pipeline(options).run(*g);
  } catch (const Error& e) {
    check_expected_error(e);
    // A verified input must stay valid through every pass. The message's start is the
    // pipeline's own text (`pass "NAME" produced an invalid graph: ...`); later parts may
    // quote the input.
    std::string_view m = e.what();
    size_t name_end = m.starts_with("pass \"") ? m.find('"', 6) : std::string_view::npos;
    if (name_end != std::string_view::npos &&
        m.substr(name_end).starts_with("\" produced an invalid graph"))
      finding("a pass broke a verified graph", m);
    return 0;
  }
  check_round_trip(*g, "optimized graph");
  return 0;
}
