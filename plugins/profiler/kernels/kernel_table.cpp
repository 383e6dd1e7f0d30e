#include "kernel_table.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

namespace plugins::kernels {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

const std::set<std::string>& type_words() {
  static const std::set<std::string> words = {"float", "double", "int",   "long", "unsigned", "bool",  "char",
                                              "short", "signed", "const", "Half", "BFloat16", "true", "false",
                                              "void",  "lambda", "operator", "anonymous", "namespace"};
  return words;
}

// Identifiers of a template argument list that are not namespaces (not followed by "::").
std::vector<std::string> argument_identifiers(const std::string& args) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size();) {
    const char c = args[i];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < args.size() && (std::isalnum(static_cast<unsigned char>(args[j])) || args[j] == '_')) ++j;
      const std::string word = args.substr(i, j - i);
      if (args.compare(j, 2, "::") != 0 && !type_words().count(word)) out.push_back(word);
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

// Innermost-first ordering for spans enclosing one moment: outer spans start
// earlier, or at the same time and end later.
bool outer_first(const Span* a, const Span* b) {
  if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
  return a->end_ns > b->end_ns;
}

std::vector<std::string> path_on(const std::vector<Span>& spans, std::uint64_t thread, std::int64_t t) {
  std::vector<const Span*> open;
  for (const Span& s : spans)
    if (s.thread == thread && s.start_ns <= t && t <= s.end_ns) open.push_back(&s);
  std::sort(open.begin(), open.end(), outer_first);
  std::vector<std::string> path;
  for (const Span* s : open) path.push_back(s->name);
  return path;
}

bool has_step(const std::vector<std::string>& path) {
  return std::any_of(path.begin(), path.end(), [](const std::string& p) { return starts_with(p, "step_"); });
}

}  // namespace

ClassRules ClassRules::parse(const std::string& yaml_text, const std::string& origin) {
  ClassRules rules;
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(origin + ": " + e.what());
  }
  if (!doc["classes"] || !doc["classes"].IsSequence())
    throw std::runtime_error(origin + ": needs a list `classes:` of {class, match}");
  const auto& known = class_names();
  for (std::size_t i = 0; i < doc["classes"].size(); ++i) {
    const YAML::Node rule = doc["classes"][i];
    const std::string where = origin + ": classes[" + std::to_string(i) + "]";
    if (!rule["class"] || !rule["match"]) throw std::runtime_error(where + ": needs `class` and `match`");
    const std::string name = rule["class"].as<std::string>();
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw std::runtime_error(where + ": class '" + name + "' is not one of matmul, attention, elementwise, "
                               "reduction, memcpy, copies, norm, optimizer, other");
    if (std::find(rules.classes_.begin(), rules.classes_.end(), name) == rules.classes_.end() && name != "other")
      rules.classes_.push_back(name);
    try {
      rules.rules_.emplace_back(name, std::regex(rule["match"].as<std::string>(),
                                                 std::regex::ECMAScript | std::regex::icase));
    } catch (const std::regex_error& e) {
      throw std::runtime_error(where + ": match is not a valid regular expression: " + e.what());
    }
  }
  rules.classes_.push_back("other");
  return rules;
}

std::string ClassRules::classify(const std::string& full_name) const {
  for (const auto& [name, re] : rules_)
    if (std::regex_search(full_name, re)) return name;
  return "other";
}

const std::vector<std::string>& ClassRules::class_names() {
  // memcpy: the default rules' copy class (Memcpy/Memset and aten copies); copies, norm and
  // optimizer: the finer split of step_classes.yaml (a train step's kernel diff).
  static const std::vector<std::string> names = {"matmul", "attention", "elementwise", "reduction", "memcpy",
                                                  "copies", "norm",   "optimizer",   "other"};
  return names;
}

std::string short_kernel_name(const std::string& full_name, std::size_t max_length) {
  std::string name = full_name;
  if (starts_with(name, "void ")) name = name.substr(5);
  // "at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>": the parenthesis
  // is part of a scope, not the argument list (it used to leave an empty name).
  const std::string anonymous = "(anonymous namespace)::";
  for (std::size_t at = name.find(anonymous); at != std::string::npos; at = name.find(anonymous, at))
    name.erase(at, anonymous.size());
  std::string result = name;
  const std::size_t open = name.find_first_of("<(");
  if (!starts_with(name, "aten::") && !starts_with(name, "Mem") && open != std::string::npos && open > 0) {
    std::string head = name.substr(0, open);
    const std::size_t colons = head.rfind("::");
    if (colons != std::string::npos) head = head.substr(colons + 2);
    result = head;
    if (name[open] == '<') {
      int depth = 0;
      std::size_t close = open;
      for (; close < name.size(); ++close) {
        if (name[close] == '<') ++depth;
        if (name[close] == '>' && --depth == 0) break;
      }
      const std::vector<std::string> ids = argument_identifiers(name.substr(open + 1, close - open - 1));
      std::string pick;
      for (const auto& id : ids) {
        const bool telling = id.find("Functor") != std::string::npos || id.find("Impl") != std::string::npos ||
                             id.find("_kernel") != std::string::npos || id.find("Kernel") != std::string::npos;
        if (telling) pick = id;  // the innermost telling name: MulFunctor over BinaryFunctor
      }
      if (pick.empty() && !ids.empty()) pick = ids.front();
      // A std:: operation (multiplies, plus, ...) says what a generic functor computes.
      static const std::set<std::string> operations = {"plus", "minus", "multiplies", "divides"};
      for (const auto& id : ids)
        if (operations.count(id) && id != pick) {
          pick += ", " + id;
          break;
        }
      if (!pick.empty()) result += "<" + pick + ">";
    }
  }
  if (result.size() > max_length) result = result.substr(0, max_length - 3) + "...";
  return result;
}

std::vector<std::string> range_path(const std::vector<Span>& spans, std::uint64_t thread, std::int64_t t,
                                    std::uint64_t home_thread) {
  std::vector<std::string> path = path_on(spans, thread, t);
  if (thread != home_thread && !has_step(path)) {
    std::vector<std::string> home = path_on(spans, home_thread, t);
    home.insert(home.end(), path.begin(), path.end());
    return home;
  }
  return path;
}

std::vector<std::string> tables_of(const std::vector<std::string>& path, const std::string& bracket) {
  const auto at = std::find(path.begin(), path.end(), bracket);
  if (at == path.end() || at + 1 == path.end() || !starts_with(*(at + 1), "step_")) return {};
  std::vector<std::string> tables = {"step"};
  if (at + 2 == path.end()) return tables;
  const std::string phase = *(at + 2);
  tables.push_back(phase);
  for (auto it = at + 3; it != path.end(); ++it) {
    if (starts_with(*it, "attention/")) {
      tables.push_back(phase + "/" + *it);
      break;
    }
  }
  return tables;
}

const PhaseTable* Breakdown::find(const std::string& phase) const {
  for (const auto& t : tables)
    if (t.phase == phase) return &t;
  return nullptr;
}

Breakdown build_breakdown(const std::vector<Activity>& activities, const std::vector<Span>& spans,
                          std::uint64_t home_thread, const ClassRules& rules, const std::string& bracket) {
  Breakdown out;
  for (const Span& s : spans) {
    if (s.thread != home_thread) continue;
    std::vector<const Span*> around;  // spans holding all of s, s included, outermost first
    for (const Span& a : spans)
      if (a.thread == home_thread && a.start_ns <= s.start_ns && s.end_ns <= a.end_ns) around.push_back(&a);
    std::sort(around.begin(), around.end(), outer_first);
    const auto at = std::find_if(around.begin(), around.end(), [&](const Span* a) { return a->name == bracket; });
    const auto self = std::find(around.begin(), around.end(), &s);
    if (at == around.end() || self == around.end() || self <= at) continue;
    if (self == at + 1 && starts_with(s.name, "step_")) ++out.steps;
    if (self == at + 2 && starts_with((*(at + 1))->name, "step_")) out.span_ns[s.name] += double(s.end_ns - s.start_ns);
  }
  std::map<std::string, std::size_t> index;
  std::vector<std::map<std::string, std::size_t>> row_index;
  auto table = [&](const std::string& name) -> PhaseTable& {
    const auto [it, inserted] = index.emplace(name, out.tables.size());
    if (inserted) {
      out.tables.push_back(PhaseTable{name});
      row_index.emplace_back();
    }
    return out.tables[it->second];
  };
  table("step");
  std::map<std::string, std::string> class_cache;
  for (const Activity& a : activities) {
    const std::vector<std::string> tables =
        tables_of(range_path(spans, a.launch_thread, a.launch_ns, home_thread), bracket);
    if (tables.empty()) continue;
    auto cls = class_cache.find(a.name);
    if (cls == class_cache.end()) cls = class_cache.emplace(a.name, rules.classify(a.name)).first;
    for (const std::string& name : tables) {
      PhaseTable& t = table(name);
      auto& rows = row_index[index[name]];
      const auto [it, inserted] = rows.emplace(a.name, t.rows.size());
      if (inserted) t.rows.push_back(KernelRow{a.name, short_kernel_name(a.name), cls->second});
      KernelRow& row = t.rows[it->second];
      row.calls += 1;
      row.total_ns += double(a.dur_ns);
      t.total_ns += double(a.dur_ns);
      t.class_ns[cls->second] += double(a.dur_ns);
      t.class_calls[cls->second] += 1;
    }
  }
  for (auto& t : out.tables)
    std::stable_sort(t.rows.begin(), t.rows.end(),
                     [](const KernelRow& a, const KernelRow& b) { return a.total_ns > b.total_ns; });
  return out;
}

AttentionFlops attention_flops(const std::vector<OpInfo>& ops, const std::vector<Span>& spans,
                               std::uint64_t home_thread, const std::string& bracket, const std::string& phase,
                               int steps) {
  static const std::set<std::string> matmuls = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm"};
  AttentionFlops f;
  for (const OpInfo& op : ops) {
    const bool matmul = matmuls.count(op.name) != 0, softmax = op.name == "aten::_softmax";
    if (!matmul && !softmax) continue;
    const auto tables = tables_of(range_path(spans, op.thread, op.start_ns, home_thread), bracket);
    const auto in = [&](const std::string& sub) {
      return std::find(tables.begin(), tables.end(), phase + "/attention/" + sub) != tables.end();
    };
    if (matmul && (in("scores") || in("weighted_sum"))) f.matmul += op.flops;
    if (softmax && in("softmax")) f.softmax += 5.0 * double(op.numel);
  }
  if (steps > 0) {
    f.matmul /= steps;
    f.softmax /= steps;
  }
  return f;
}

}  // namespace plugins::kernels
