// The step report's layout (report_detail::lay_out) on a synthetic graph of 10,000 boxes: every
// box placed once, on its own spot, every edge pointing down, and the page rendering each group
// and buffer once.
#include <gtest/gtest.h>

#include <set>

#include "tests/report/html_scan.h"
#include "tests/report/synthetic_report.h"

namespace kiln {
namespace {

TEST(StepReportLayout, TenThousandBoxesEachOnItsOwnSpotWithEdgesPointingDown) {
  report_detail::ReportData d = test::synthetic_report(10000);
  const report_detail::Drawing& groups = d.parts.at(0).groups;
  std::set<std::pair<double, double>> spots;
  for (int b : groups.boxes) {
    const auto& box = d.boxes[size_t(b)];
    EXPECT_TRUE(spots.insert({box.x, box.y}).second) << "box " << b << " shares its spot";
    EXPECT_GE(box.x, report_detail::kMargin);
    EXPECT_LE(box.x + report_detail::kBoxWidth, groups.width);
    EXPECT_LE(box.y + report_detail::kBoxHeight, groups.height);
  }
  for (const auto& e : groups.edges)
    EXPECT_LT(d.boxes[size_t(e.from)].y, d.boxes[size_t(e.to)].y) << e.from << " -> " << e.to;
  // Rows of at most 8 boxes: the drawing is no wider than 8 boxes.
  EXPECT_LE(groups.width,
            2 * report_detail::kMargin + 8 * (report_detail::kBoxWidth + report_detail::kGapX));
  EXPECT_EQ(d.parts.at(0).layers.boxes.size(), 200u);

  test::HtmlDocument doc = test::scan_html(report_detail::render_html(d));
  ASSERT_TRUE(doc.error.empty()) << doc.error;
  std::map<std::string, int> drawn = test::count_by(doc, "data-group");
  EXPECT_EQ(drawn.size(), 10000u);
  for (const auto& [group, count] : drawn) EXPECT_EQ(count, 1) << group;
  EXPECT_EQ(test::count_by(doc, "data-buffer").size(), 10000u);
}

}  // namespace
}  // namespace kiln
