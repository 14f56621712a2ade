// The step report (kiln/frontend/function/report.h) of the model zoo's training steps (MLP,
// CNN, LSTM, transformer), scanned: every
// fusion group and buffer drawn once, the times adding up to the measured step time, nothing
// fetched from a network, boxes that do not overlap, and the file written atomically.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/report/html_scan.h"
#include "tests/report/report_expect.h"
#include "tools/report_steps.h"

namespace kiln {
namespace {

using test::count_by;
using test::scan_html;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("kiln_report_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

int64_t attr_ns(const test::HtmlElement& e) { return std::stoll(e.get("data-ns")); }

class StepReportOf : public ::testing::TestWithParam<std::string> {};

TEST_P(StepReportOf, DrawsEveryGroupAndBufferOnceAndTimesAddUp) {
  tools::ReportStep step = tools::make_report_step(GetParam(), 16, /*seq_len=*/16);
  const test::ReportExpectation expect = test::expected_report(step.form);
  ASSERT_GT(expect.groups.size(), 2u);
  ASSERT_GT(expect.buffers.size(), 5u);

  // The test profiles too, so it sees the calls measure_step measures.
  start_profiling();
  const int calls = 3;
  StepTiming timing = measure_step(
      step.form, [&] { step.run(); }, calls);
  std::vector<ProfileEvent> events = stop_profiling();
  int64_t total = 0;
  int seen = 0;
  for (auto it = events.rbegin(); it != events.rend() && seen < calls; ++it)
    if (it->category == "call" && it->name == step.form.executable()->name()) {
      total += it->duration_ns;
      ++seen;
    }
  ASSERT_EQ(seen, calls);
  EXPECT_EQ(timing.calls, calls);
  EXPECT_EQ(timing.step_ns, total / calls);

  const std::string html = report_html(step.form, {.title = GetParam(), .timing = &timing});
  test::HtmlDocument doc = scan_html(html);
  test::expect_drawn_once(doc, expect);

  // Times: the rows' nanoseconds and the runtime's time between steps add up to the step.
  int64_t step_ns = -1, overhead_ns = -1, rows = 0, boxes = 0, layers = 0;
  std::map<std::string, int> layer_of;  // box id -> layer boxes that hold it
  int row_count = 0;
  for (const auto& e : doc.elements) {
    if (e.get("id") == "summary") step_ns = std::stoll(e.get("data-step-ns"));
    if (e.get("id") == "overhead-row") overhead_ns = attr_ns(e);
    if (e.has("data-step")) {
      rows += attr_ns(e);
      ++row_count;
      EXPECT_TRUE(e.has("data-box-of")) << "step " << e.get("data-step") << " has no box";
    }
    if (e.tag == "g" && e.has("data-box") && !e.has("data-layer")) boxes += attr_ns(e);
    if (e.tag == "g" && e.has("data-layer")) {
      layers += attr_ns(e);
      std::istringstream members(e.get("data-members"));
      for (std::string m; members >> m;) ++layer_of[m];
    }
  }
  // A loop's body steps (one row each, under the loop's row) are inside its step's time.
  for (size_t k = 0; k < timing.nested_of.size(); ++k) {
    int64_t inside = 0;
    for (const NestedStepTime& n : timing.nested_of[k]) inside += n.ns;
    EXPECT_LE(inside, timing.step_ns_of[k]) << "step " << k;
    EXPECT_EQ(count_by(doc, "data-nested-of")[std::to_string(k)], int(timing.nested_of[k].size()));
  }
  if (GetParam() == "lstm") {
    EXPECT_GT(count_by(doc, "data-nested-of").size(), 0u);
  }
  EXPECT_EQ(step_ns, timing.step_ns);
  ASSERT_GE(overhead_ns, 0);
  EXPECT_EQ(rows + overhead_ns, step_ns);
  EXPECT_EQ(boxes + overhead_ns, step_ns);
  EXPECT_EQ(layers + overhead_ns, step_ns);
  // The layer view collapses every box of the group view into exactly one layer.
  for (const auto& e : doc.elements) {
    if (e.tag == "g" && e.has("data-box") && !e.has("data-layer")) {
      EXPECT_EQ(layer_of[e.get("data-box")], 1) << "box " << e.get("data-box");
    }
  }
  EXPECT_GT(rows, 0);

  // Self-contained: no address of another resource, nothing loaded from elsewhere.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  for (const auto& e : doc.elements) {
    EXPECT_FALSE(e.has("src")) << "<" << e.tag << " src=" << e.get("src") << ">";
    EXPECT_FALSE(e.has("href")) << "<" << e.tag << " href=" << e.get("href") << ">";
  }
}

// A Keras train step calls its layers, loss and optimizer from kiln's code: every box still
// names the user's code that made it (where the model was built, compile() was called, the
// optimizer made: tools/model_zoo.cc, tools/char_lm.cc, tools/report_steps.cc), a gradient's
// boxes the location of the forward nodes they differentiate, and the gradient part collapses
// into the forward part's layers.
TEST_P(StepReportOf, EveryBoxNamesTheUserCodeThatMadeIt) {
  tools::ReportStep step = tools::make_report_step(GetParam(), 8, /*seq_len=*/8);
  test::HtmlDocument doc = scan_html(report_html(step.form));
  ASSERT_TRUE(doc.error.empty()) << doc.error;
  const std::regex user_code(R"((model_zoo|char_lm|report_steps)\.cc:[0-9]+:[0-9]+$)");
  std::map<std::string, std::set<std::string>> locations_of;  // "part layer" -> locations
  std::map<std::string, std::set<std::string>> layers_of;     // part -> layer names
  std::string part;
  int boxes = 0;
  for (const auto& e : doc.elements) {
    if (e.tag == "svg" && e.has("data-part")) part = e.get("data-part");
    if (e.tag != "g" || !e.has("data-box")) continue;
    ++boxes;
    const std::string location = e.get("data-location");
    EXPECT_TRUE(std::regex_search(location, user_code))
        << part << " box " << e.get("data-box") << " (" << e.get("data-group")
        << e.get("data-scope") << e.get("data-layer") << "): location \"" << location << "\"";
    if (e.has("data-layer")) {
      layers_of[part].insert(e.get("data-layer"));
      locations_of[part + " " + e.get("data-layer")].insert(location);
    }
  }
  EXPECT_GT(boxes, 10);
  // The step opens collapsed to its layers (fewer boxes than its fusion groups and scopes).
  EXPECT_NE(report_html(step.form).find("<section id=\"graph\" class=\"view-layers\""),
            std::string::npos);
  // Every layer the gradient part shows is a forward layer, at one of its locations.
  ASSERT_FALSE(layers_of["gradient"].empty());
  for (const std::string& layer : layers_of["gradient"]) {
    EXPECT_EQ(layers_of["forward"].count(layer), 1u) << "gradient layer " << layer;
    for (const std::string& at : locations_of["gradient " + layer])
      EXPECT_EQ(locations_of["forward " + layer].count(at), 1u) << layer << " at " << at;
  }
}

INSTANTIATE_TEST_SUITE_P(Steps, StepReportOf,
                         ::testing::Values("mlp", "cnn", "lstm", "transformer"),
                         [](const auto& info) { return info.param; });

TEST(StepReport, BoxesOfOnePartDoNotOverlap) {
  tools::ReportStep step = tools::make_report_step("mlp", 16);
  test::HtmlDocument doc = scan_html(report_html(step.form));
  ASSERT_TRUE(doc.error.empty()) << doc.error;
  const std::regex translate(R"(translate\((-?[0-9.]+),(-?[0-9.]+)\))");
  std::map<std::string, std::vector<std::pair<double, double>>> by_part;
  std::string part;
  std::set<std::string> parts;
  for (const auto& e : doc.elements) {
    if (e.tag == "svg" && e.has("data-part")) part = e.get("data-part") + " " + e.get("data-view");
    if (e.tag == "svg" && !e.has("data-part")) part.clear();
    if (e.tag != "g" || !e.has("data-box")) continue;
    std::smatch m;
    const std::string t = e.get("transform");
    ASSERT_TRUE(std::regex_search(t, m, translate)) << t;
    by_part[part].emplace_back(std::stod(m[1]), std::stod(m[2]));
    parts.insert(part);
  }
  // A training step has its three parts: forward, gradient, update.
  EXPECT_EQ(parts, (std::set<std::string>{"forward groups", "gradient groups", "update groups",
                                          "forward layers", "gradient layers", "update layers"}));
  for (const auto& [name, boxes] : by_part)
    for (size_t i = 0; i < boxes.size(); ++i)
      for (size_t j = i + 1; j < boxes.size(); ++j) {
        bool apart = std::abs(boxes[i].first - boxes[j].first) >= 200 ||
                     std::abs(boxes[i].second - boxes[j].second) >= 46;
        EXPECT_TRUE(apart) << name << ": boxes " << i << " and " << j << " overlap";
      }
}

TEST(StepReport, WritesAtomicallyAndNamesABadPath) {
  tools::ReportStep step = tools::make_report_step("mlp", 8);
  auto dir = temp_dir("write");
  const std::string path = (dir / "step.html").string();
  {
    std::ofstream old(path);
    old << "old report";
  }
  step.form.write_report(path);
  EXPECT_EQ(read_file(path), report_html(step.form));  // untimed: the same page each time
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename(), "step.html") << "left behind: " << entry.path();

  const std::string bad = (dir / "no_such_dir" / "step.html").string();
  try {
    step.form.write_report(bad);
    FAIL() << "writing " << bad << " did not fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(StepReport, ConcreteFunctionReportLeavesItsVariablesAlone) {
  tools::ReportStep step = tools::make_report_step("mlp", 8);
  std::vector<Tensor> before;
  for (const VariableUse& v : step.step.variables()) before.push_back(v.variable.value());
  auto dir = temp_dir("concrete");
  const std::string path = (dir / "step.html").string();
  write_report(step.step, {step.x, step.y}, path, 2);
  test::HtmlDocument doc = scan_html(read_file(path));
  test::expect_drawn_once(doc, test::expected_report(step.form));
  EXPECT_EQ(count_by(doc, "data-calls")["2"], 1);
  const std::vector<VariableUse> vars = step.step.variables();
  ASSERT_EQ(vars.size(), before.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    Tensor now = vars[i].variable.value();
    ASSERT_EQ(now.array().nbytes(), before[i].array().nbytes());
    EXPECT_EQ(std::memcmp(now.array().raw(), before[i].array().raw(), now.array().nbytes()), 0)
        << vars[i].variable.name() << " changed";
  }
  std::filesystem::remove_all(dir);
}

TEST(StepReport, ChartsEagerAgainstCompiled) {
  tools::ReportStep step = tools::make_report_step("mlp", 8);
  Optimizer opt = Adam();
  Loss loss_fn = losses::sparse_categorical_crossentropy(/*from_logits=*/true);
  auto train = [&](const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor loss = loss_fn(y, step.model(x, /*training=*/true));
    std::vector<Variable> vars = step.model->trainable_weights();
    opt->apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  ModeComparison c = compare_modes(
      CompareOptions{.name = "report_compare", .warmup = 1, .steps = 3, .print_to = nullptr}, train,
      step.x, step.y);
  ASSERT_GT(c.differences.size(), 2u);
  test::HtmlDocument doc = scan_html(report_html(step.form, {.title = "mlp", .comparison = &c}));
  ASSERT_TRUE(doc.error.empty()) << doc.error;
  std::map<std::string, int> results = count_by(doc, "data-result");
  EXPECT_EQ(results.size(), c.differences.size());
  for (const ResultDifference& r : c.differences) EXPECT_EQ(results[r.name], 1) << r.name;
  int lines = 0;
  for (const auto& e : doc.elements)
    if (e.tag == "polyline" && e.has("data-mode")) {
      ++lines;
      std::istringstream points(e.get("points"));
      int n = 0;
      for (std::string p; points >> p;) ++n;
      EXPECT_EQ(n, 3) << e.get("data-mode");
    }
  EXPECT_EQ(lines, 2);
}

TEST(StepReport, KilnReportDirWritesOnePerCompiledFunction) {
  auto dir = temp_dir("env");
  ::setenv("KILN_REPORT", dir.string().c_str(), 1);
  tools::ReportStep step = tools::make_report_step("mlp", 8);
  ::unsetenv("KILN_REPORT");
  std::vector<std::filesystem::path> pages;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) pages.push_back(entry.path());
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_EQ(pages[0].extension(), ".html");
  test::HtmlDocument doc = scan_html(read_file(pages[0].string()));
  test::expect_drawn_once(doc, test::expected_report(step.form));
  std::filesystem::remove_all(dir);
}

TEST(StepReport, BoxesShowTheUserCodeThatMadeThem) {
  tools::ReportStep step = tools::make_report_step("mlp", 8);
  auto forward = function([&](const Tensor& x) { return step.model(x); });  // this line
  const int line = __LINE__ - 1;
  ConcreteFunction cf = forward.concrete(step.x);
  test::HtmlDocument doc = scan_html(report_html(cf.compiled_form()));
  ASSERT_TRUE(doc.error.empty()) << doc.error;
  int located = 0;
  const std::string html = report_html(cf.compiled_form());
  const std::string where = "report_test.cc:" + std::to_string(line) + ":";
  for (size_t at = html.find(where); at != std::string::npos; at = html.find(where, at + 1))
    ++located;
  EXPECT_GT(located, 0) << "no box names " << where;
}

TEST(StepReport, MeasureStepNeedsTheFormsExecutable) {
  tools::ReportStep step = tools::make_report_step("mlp", 8);
  EXPECT_THROW(measure_step(
                   step.form, [] {}, 2),
               Error);
  EXPECT_THROW(measure_step(
                   step.form, [&] { step.run(); }, 0),
               Error);
}

}  // namespace
}  // namespace kiln
