// profiler/kernels, the part without LibTorch's profiler: which range each
// kernel ran in, per-phase tables, kernel classes and short names. Kept apart
// from the Kineto plumbing so tests can feed it hand-made events.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace plugins::kernels {

// A runner range as the trace saw it (a user annotation).
struct Span {
  std::string name;
  std::uint64_t thread = 0;
  std::int64_t start_ns = 0, end_ns = 0;
};

// A unit of timed work: a GPU kernel, memcpy or memset, or on a CPU an aten op
// (its self time). `launch_*` is where the host issued it (for a CPU op: the op itself).
struct Activity {
  std::string name;
  std::int64_t start_ns = 0, dur_ns = 0;
  std::uint64_t launch_thread = 0;
  std::int64_t launch_ns = 0;
};

// A CPU op with what the profiler computed about it (for the attention FLOPs).
struct OpInfo {
  std::string name;
  std::uint64_t thread = 0;
  std::int64_t start_ns = 0;
  double flops = 0;         // Kineto's count (matmuls and some elementwise ops)
  std::int64_t numel = 0;   // elements of the first input, when shapes were recorded
};

// Ordered class rules (kernel_classes.yaml): first match wins, else "other".
class ClassRules {
 public:
  // Parses the YAML text; throws std::runtime_error naming `origin` and the rule.
  static ClassRules parse(const std::string& yaml_text, const std::string& origin);
  std::string classify(const std::string& full_name) const;
  // Every class a rules file may name (the profiler's share_/_ms/_kernels metrics), "other" last.
  static const std::vector<std::string>& class_names();
  // The classes this file names, in order of first appearance, then "other": the records' columns.
  const std::vector<std::string>& classes() const { return classes_; }

 private:
  std::vector<std::pair<std::string, std::regex>> rules_;
  std::vector<std::string> classes_;
};

// "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, ...>(...)"
// -> "vectorized_elementwise_kernel<CUDAFunctor_add>"; "aten::mm" stays.
std::string short_kernel_name(const std::string& full_name, std::size_t max_length = 80);

// The range path enclosing host time `t` on `thread`, outermost first. Ranges on
// autograd's threads carry no step/phase of their own: when `thread` has no span
// named like `anchor` (e.g. "measure"), the home thread's path at `t` comes first.
std::vector<std::string> range_path(const std::vector<Span>& spans, std::uint64_t thread, std::int64_t t,
                                    std::uint64_t home_thread);

// The tables a path belongs to: "step" for anything inside a measured step, the
// phase ("forward"), and inside attention the sub-range ("forward/attention/softmax").
std::vector<std::string> tables_of(const std::vector<std::string>& path, const std::string& bracket);

struct KernelRow {
  std::string full_name, short_name, kernel_class;
  double calls = 0, total_ns = 0;  // over all profiled steps
};

struct PhaseTable {
  std::string phase;
  double total_ns = 0;
  std::vector<KernelRow> rows;  // by total time, largest first
  std::map<std::string, double> class_ns;
  std::map<std::string, double> class_calls;
};

struct Breakdown {
  int steps = 0;                         // profiled steps (step_<i> spans inside the bracket)
  std::vector<PhaseTable> tables;        // "step" first, then phases in order of appearance
  std::map<std::string, double> span_ns; // summed host duration of each table's ranges (phases only)
  const PhaseTable* find(const std::string& phase) const;
};

Breakdown build_breakdown(const std::vector<Activity>& activities, const std::vector<Span>& spans,
                          std::uint64_t home_thread, const ClassRules& rules, const std::string& bracket);

// Attention FLOPs per profiled step inside `phase`: matmul FLOPs in the scores and
// weighted-sum ranges (Kineto's counts), softmax FLOPs = 5 per score element
// (max, subtract, exp, sum, divide).
struct AttentionFlops {
  double matmul = 0, softmax = 0;
};
AttentionFlops attention_flops(const std::vector<OpInfo>& ops, const std::vector<Span>& spans,
                               std::uint64_t home_thread, const std::string& bracket, const std::string& phase,
                               int steps);

}  // namespace plugins::kernels
