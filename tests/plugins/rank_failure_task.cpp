// A task for the launcher's failure tests: on `fail_rank` it exits the process
// (exit_code > 0) or throws (exit_code 0) before joining an all-reduce that every
// other rank is already blocked in.
#include <cstdlib>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include "runner/task.hpp"

namespace {

class RankFailure : public runner::Task {
 public:
  void run(runner::Context& ctx, const runner::Params& p, runner::Recorder& out) override {
    if (!ctx.dist.group) throw std::runtime_error("rank_failure: needs 2 or more ranks");
    if (ctx.dist.rank == p.integer("fail_rank")) {
      if (p.integer("exit_code") > 0) std::_Exit(static_cast<int>(p.integer("exit_code")));
      throw std::runtime_error("rank_failure: planned failure");
    }
    std::vector<at::Tensor> t = {torch::ones({4})};
    ctx.dist.group->allreduce(t)->wait();
    runner::Record r;
    r.add("sum", t[0][0].item<double>(), "");
    out.emit(std::move(r));
  }
};

runner::PluginManifest make_manifest() {
  runner::PluginManifest m;
  m.kind = runner::PluginKind::Task;
  m.name = "rank_failure";
  m.version = "1";
  m.description = "test: one rank dies (exit or exception) while the others wait in an all-reduce";
  m.options = {runner::opt_int("fail_rank", 1, "the rank that fails"),
               runner::opt_int("exit_code", 3, "> 0: exit with this code; 0: throw")};
  m.create = [](const runner::Params&, runner::Context&) -> std::unique_ptr<runner::PluginBase> {
    return std::make_unique<RankFailure>();
  };
  return m;
}

}  // namespace

RUNNER_PLUGIN(make_manifest)
