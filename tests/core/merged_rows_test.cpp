// Two points on one table row: the table shows one and the other vanished without a
// word (rows: [model.attention] over {name: sw, window: 16} and {name: sw, window: 64}).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "record_lines.hpp"

namespace runner::report {
namespace {

using nlohmann::json;

json point(int index, const std::string& attention, int window, double ms) {
  return {{"experiment", "x"}, {"part", "main"}, {"point", index}, {"status", "ok"},
          {"params", {{"model.attention", attention}, {"model.attention.window", window}}},
          {"labels", json::object()}, {"metrics", {{"step_ms", {{"unit", "ms"}, {"value", ms}}}}}};
}

TEST(MergedRows, TwoPointsOnOneRowAreNamedOnStderr) {
  const TableSpec spec =
      parse_report_spec(YAML::Load("{id: r, tables: [{name: t, rows: [model.attention], columns: [{metric: step_ms}]}]}"),
                        "test.yaml")
          .tables.at(0);
  const std::vector<json> lines = {point(0, "sdpa", 0, 1.0), point(1, "sw", 16, 2.0), point(2, "sw", 64, 3.0)};
  ::testing::internal::CaptureStderr();
  const BuiltTable merged = build_table(spec, lines);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(merged.cells.size(), 2u);
  EXPECT_EQ(warning, "warning: table 't': 1 row(s) hold records of more than one point (sw); each cell shows only "
                     "the last. Add the parameter that tells them apart to rows\n");

  // Told apart by a second row key: no warning.
  const TableSpec split = parse_report_spec(YAML::Load("{id: r, tables: [{name: t, rows: [model.attention, "
                                                       "model.attention.window], columns: [{metric: step_ms}]}]}"),
                                            "test.yaml")
                              .tables.at(0);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(build_table(split, lines).cells.size(), 3u);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// Adding model.attention.window to rows dropped the sdpa and naive rows, which have no
// window: an option of a plugin named by another row key leaves its cell blank instead.
// Other missing row keys still select (a `moment` row key picks the memory records).
TEST(MergedRows, AnOptionOnlySomePluginsHaveLeavesABlankCellNotAMissingRow) {
  json sdpa = point(0, "sdpa", 0, 1.0), naive = point(1, "naive", 0, 1.5);
  sdpa["params"].erase("model.attention.window");
  naive["params"].erase("model.attention.window");
  const std::vector<json> lines = {sdpa, naive, point(2, "sw", 16, 2.0), point(3, "sw", 64, 3.0)};
  const auto spec = [](const std::string& rows) {
    return parse_report_spec(YAML::Load("{id: r, tables: [{name: t, rows: " + rows + ", columns: [{metric: step_ms}]}]}"),
                             "test.yaml")
        .tables.at(0);
  };
  const BuiltTable table = build_table(spec("[model.attention, model.attention.window]"), lines);
  ASSERT_EQ(table.cells.size(), 4u);
  EXPECT_EQ(table.cells[0][0], "sdpa");
  EXPECT_EQ(table.cells[0][1], "");
  EXPECT_EQ(table.cells[1][0], "naive");
  EXPECT_EQ(table.cells[3][1], "64");
  // A row key that is not an option of a shown plugin still selects the records that have it.
  json labelled = point(4, "sdpa", 0, 4.0);
  labelled["labels"] = {{"moment", "after_init"}};
  EXPECT_EQ(build_table(spec("[model.attention, moment]"), {sdpa, labelled}).cells.size(), 1u);
}

}  // namespace
}  // namespace runner::report
