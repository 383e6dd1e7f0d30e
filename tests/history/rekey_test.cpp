// HistoryStore::rekey: a moved script (`script` bench/ -> pytorch/) or a renamed
// value carried into the stored points, so a point's history goes on across the
// rename; and refused, writing nothing, where it would merge two different points.
#include <gtest/gtest.h>

#include "history/store.hpp"
#include "support.hpp"

namespace runner::history {
namespace {

using testing::around;
using testing::env_json;
using testing::fresh_dir;
using testing::record;
using testing::stored;

// A PyTorch-twin point: part main, point `point`, its script as a parameter.
nlohmann::json twin(int point, const std::string& script, const std::string& experiment = "demo") {
  nlohmann::json j = record(point, 64, around(1.0));
  j["experiment"] = experiment;
  j["params"]["script"] = script;
  return j;
}

std::int64_t add_run(HistoryStore& store, const std::filesystem::path& dir, const std::string& name,
                     const std::vector<nlohmann::json>& points, const std::string& experiment = "demo") {
  const auto id = store.begin_run(experiment, dir / name, env_json(), false);
  for (const auto& j : points) store.add_point(id, stored({j}));
  store.finish_run(id);
  return id;
}

std::vector<std::string> scripts(const HistoryStore& store, std::int64_t run) {
  std::vector<std::string> out;
  for (const auto& r : store.records(run)) out.push_back(r.params["script"].get<std::string>());
  return out;
}

TEST(HistoryRekey, AMovedScriptFolderKeepsThePointsHistory) {
  const auto dir = fresh_dir("rekey-folder");
  HistoryStore store(dir / "h.sqlite");
  const auto before = add_run(store, dir, "a",
                              {twin(0, "bench/train.py"), twin(1, "bench/adamw.py"), twin(2, "benchmark/x.py")});
  const auto other = add_run(store, dir, "b", {twin(0, "bench/train.py", "elsewhere")}, "elsewhere");
  const auto after = add_run(store, dir, "c", {twin(0, "pytorch/train.py")});
  // The split the rename makes: the run after it shares no point with the run before.
  EXPECT_NE(point_identity(store.records(before)[0]), point_identity(store.records(after)[0]));

  const RekeyCount n = store.rekey({"demo", "script", "bench/", "pytorch/", /*merge=*/true});
  EXPECT_EQ(n.records, 2);
  EXPECT_EQ(n.points, 2);
  EXPECT_EQ(n.runs, 1);
  // Only values under the folder bench/ move (not benchmark/), only in that experiment.
  EXPECT_EQ(scripts(store, before), (std::vector<std::string>{"pytorch/train.py", "pytorch/adamw.py", "benchmark/x.py"}));
  EXPECT_EQ(scripts(store, other), (std::vector<std::string>{"bench/train.py"}));
  for (const auto& r : store.records(before)) EXPECT_EQ(r.key, point_key(r.part, r.params, r.labels));
  EXPECT_EQ(point_identity(store.records(before)[0]), point_identity(store.records(after)[0]));
  // Once done, it has nothing more to do.
  EXPECT_EQ(store.rekey({"demo", "script", "bench/", "pytorch/"}).records, 0);
}

TEST(HistoryRekey, ADryRunCountsAndWritesNothing) {
  const auto dir = fresh_dir("rekey-dry");
  HistoryStore store(dir / "h.sqlite");
  const auto id = add_run(store, dir, "a", {twin(0, "bench/train.py"), twin(1, "bench/adamw.py")});
  const auto key = store.records(id)[0].key;
  EXPECT_EQ(store.rekey({"demo", "script", "bench/", "pytorch/"}, /*dry_run=*/true).records, 2);
  EXPECT_EQ(scripts(store, id), (std::vector<std::string>{"bench/train.py", "bench/adamw.py"}));
  EXPECT_EQ(store.records(id)[0].key, key);
}

TEST(HistoryRekey, AValueNotEndingInASlashRenamesThatValueOnly) {
  const auto dir = fresh_dir("rekey-value");
  HistoryStore store(dir / "h.sqlite");
  const auto id = add_run(store, dir, "a", {twin(0, "fused"), twin(1, "fused_foreach")});
  EXPECT_EQ(store.rekey({"demo", "script", "fused", "multi_tensor"}).records, 1);
  EXPECT_EQ(scripts(store, id), (std::vector<std::string>{"multi_tensor", "fused_foreach"}));
  // A folder moves to a folder: "bench/" -> "pytorch" would glue names together.
  EXPECT_THROW(store.rekey({"demo", "script", "bench/", "pytorch"}), std::invalid_argument);
  EXPECT_THROW(store.rekey({"demo", "script", "fused", "fused"}), std::invalid_argument);
}

TEST(HistoryRekey, RefusesToMergeIntoAPointStoredUnderTheNewValueUnlessAsked) {
  const auto dir = fresh_dir("rekey-merge");
  HistoryStore store(dir / "h.sqlite");
  const auto before = add_run(store, dir, "a", {twin(0, "bench/train.py"), twin(1, "bench/adamw.py")});
  add_run(store, dir, "b", {twin(0, "pytorch/train.py")});
  try {
    store.rekey({"demo", "script", "bench/", "pytorch/"});
    FAIL() << "merged without --merge";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("would merge into the point stored under script pytorch/train.py"),
              std::string::npos) << e.what();
  }
  // One transaction: the point that had no conflict did not move either.
  EXPECT_EQ(scripts(store, before), (std::vector<std::string>{"bench/train.py", "bench/adamw.py"}));
  EXPECT_EQ(store.rekey({"demo", "script", "bench/", "pytorch/", /*merge=*/true}).records, 2);
}

TEST(HistoryRekey, NeverMergesTwoPointsOfOneRun) {
  const auto dir = fresh_dir("rekey-one-run");
  HistoryStore store(dir / "h.sqlite");
  const auto id = add_run(store, dir, "a", {twin(0, "bench/train.py"), twin(1, "pytorch/train.py")});
  EXPECT_THROW(store.rekey({"demo", "script", "bench/", "pytorch/", /*merge=*/true}), std::runtime_error);
  EXPECT_EQ(scripts(store, id), (std::vector<std::string>{"bench/train.py", "pytorch/train.py"}));
}

}  // namespace
}  // namespace runner::history
