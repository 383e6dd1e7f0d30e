#include "history/run_recorder.hpp"

#include <iostream>

#include "history/store.hpp"

namespace runner::history {

RunRecorder::RunRecorder(const std::filesystem::path& file, const std::string& experiment,
                         const std::filesystem::path& run_dir, const nlohmann::json& env, bool smoke) {
  if (file.empty()) return;
  try {
    store_ = std::make_unique<HistoryStore>(file);
    // Records already in the directory: a resumed run, which continues its
    // history run (and adds any of its points the history lacks).
    const auto results = run_dir / "results.jsonl";
    std::error_code ec;
    const auto recorded = std::filesystem::file_size(results, ec) > 0 && !ec ? read_results_file(results)
                                                                            : std::vector<StoredRecord>{};
    run_id_ = recorded.empty() ? store_->begin_run(experiment, run_dir, env, smoke)
                               : store_->resume_run(experiment, run_dir, env, smoke, recorded);
    std::cerr << "history: run " << run_id_ << " in " << file.string() << "\n";
  } catch (const std::exception& e) {
    disable(e.what());
  }
}

RunRecorder::~RunRecorder() = default;

void RunRecorder::disable(const std::string& why) {
  std::cerr << "warning: history disabled for this run: " << why << "\n";
  store_.reset();
}

void RunRecorder::add_point(const std::vector<StoredRecord>& records) {
  if (!store_) return;
  try {
    store_->add_point(run_id_, records);
  } catch (const std::exception& e) {
    disable(e.what());
  }
}

void RunRecorder::finish() {
  if (!store_) return;
  try {
    store_->finish_run(run_id_);
  } catch (const std::exception& e) {
    disable(e.what());
  }
}

}  // namespace runner::history
