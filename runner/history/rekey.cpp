// HistoryStore::rekey: a renamed parameter value (a moved script, a renamed
// option value) carried into the stored points. The value is part of the point
// key, so without it a point's history would split at the rename: runs before it
// and runs after it would share no point to compare or chart.
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "history/sqlite.hpp"
#include "history/store.hpp"

namespace runner::history {
namespace {

// What `value` becomes under the rename, or nullopt when the rename does not match it.
std::optional<std::string> renamed(const std::string& value, const Rekey& r) {
  if (value == r.from) return r.to;
  if (r.from.back() == '/' && value.rfind(r.from, 0) == 0) return r.to + value.substr(r.from.size());
  return std::nullopt;
}

struct Change {
  std::int64_t record = 0, run = 0, point = 0;
  std::string part, old_value, new_value, key, params;
};

std::string point_name(const Change& c) {
  return "part " + c.part + " point " + std::to_string(c.point) + " of run " + std::to_string(c.run);
}

}  // namespace

RekeyCount HistoryStore::rekey(const Rekey& r, bool dry_run) {
  if (r.experiment.empty() || r.param.empty() || r.from.empty())
    throw std::invalid_argument("a rekey needs an experiment, a parameter and the value to rename (--from)");
  if (r.from == r.to) throw std::invalid_argument("--from and --to are the same value: nothing to rename");
  if (r.from.back() == '/' && (r.to.empty() || r.to.back() != '/'))
    throw std::invalid_argument("--from " + r.from + " is a folder (it ends in /): --to must end in / too");
  // One transaction: the check and the rewrite see the same records, and a refused
  // or interrupted rekey leaves the store as it was.
  Transaction tx(db_);
  std::map<std::string, std::set<std::int64_t>> kept;  // point key -> runs holding it, not renamed
  std::vector<Change> changes;
  {
    Statement s(db_, "SELECT r.id, r.run_id, r.part, r.point, r.point_key, r.params, r.labels FROM records r "
                     "JOIN runs u ON u.id = r.run_id WHERE u.experiment = ?");
    s.bind(1, r.experiment);
    while (s.step()) {
      nlohmann::json params = nlohmann::json::parse(s.text(5), nullptr, false);
      const bool has = params.is_object() && params.contains(r.param) && params[r.param].is_string();
      const auto value = has ? renamed(params[r.param].get<std::string>(), r) : std::nullopt;
      if (!value) {
        kept[s.text(4)].insert(s.int64(1));
        continue;
      }
      Change c{s.int64(0), s.int64(1), s.int64(3), s.text(2), params[r.param].get<std::string>(), *value};
      params[r.param] = *value;
      const nlohmann::json labels = nlohmann::json::parse(s.text(6), nullptr, false);
      c.key = point_key(c.part, params, labels);
      c.params = params.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      changes.push_back(std::move(c));
    }
  }
  // The rename must not merge points. One run holding both values holds two points
  // (never one); other runs holding the new value are the same point only if the user says so.
  for (const Change& c : changes) {
    const auto same = kept.find(c.key);
    if (same == kept.end()) continue;
    const std::string what = point_name(c) + " (" + r.param + " " + c.old_value + ")";
    if (same->second.count(c.run))
      throw std::runtime_error(what + " would become a second point of that run with " + r.param + " " +
                               c.new_value + ", which it already has: they are different points, not renamed");
    if (!r.merge)
      throw std::runtime_error(what + " would merge into the point stored under " + r.param + " " + c.new_value +
                               " (run " + std::to_string(*same->second.begin()) +
                               "); if they are one point measured before and after the rename, add --merge");
  }
  RekeyCount count;
  std::set<std::int64_t> runs;
  std::set<std::tuple<std::int64_t, std::string, std::int64_t>> points;
  for (const Change& c : changes) {
    runs.insert(c.run);
    points.emplace(c.run, c.part, c.point);
  }
  count.records = static_cast<std::int64_t>(changes.size());
  count.points = static_cast<std::int64_t>(points.size());
  count.runs = static_cast<std::int64_t>(runs.size());
  if (dry_run) return count;  // the transaction rolls back: nothing was written
  Statement update(db_, "UPDATE records SET params = ?, point_key = ? WHERE id = ?");
  for (const Change& c : changes) {
    update.reset();
    update.bind(1, c.params).bind(2, c.key).bind(3, c.record);
    update.step();
  }
  tx.commit();
  return count;
}

}  // namespace runner::history
