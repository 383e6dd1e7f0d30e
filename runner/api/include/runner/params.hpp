// Resolved option values handed to a plugin: every declared option is present
// (defaults filled in by the host after validation), so getters never guess.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace runner {

class Params;

// One option value. Lists hold scalars; a nested plugin's options are a Params.
struct Value {
  using List = std::vector<Value>;
  std::variant<std::monostate, bool, std::int64_t, double, std::string, List,
               std::shared_ptr<Params>>
      data;

  Value() = default;
  Value(bool b) : data(b) {}
  Value(int i) : data(static_cast<std::int64_t>(i)) {}
  Value(std::int64_t i) : data(i) {}
  Value(double d) : data(d) {}
  Value(const char* s) : data(std::string(s)) {}
  Value(std::string s) : data(std::move(s)) {}
  Value(List l) : data(std::move(l)) {}
  Value(std::shared_ptr<Params> p) : data(std::move(p)) {}

  bool empty() const { return std::holds_alternative<std::monostate>(data); }
  // Human/YAML-ish rendering used in records, tables and error messages.
  std::string to_string() const;
};

class Params {
 public:
  Params() = default;
  explicit Params(std::string plugin_name) : plugin_name_(std::move(plugin_name)) {}

  // For a nested plugin's options: the plugin's name ("naive", "adamw").
  const std::string& plugin_name() const { return plugin_name_; }
  void set_plugin_name(std::string n) { plugin_name_ = std::move(n); }

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  void set(const std::string& key, Value v) { values_[key] = std::move(v); }
  const Value& at(const std::string& key) const;

  bool flag(const std::string& key) const;
  std::int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;  // accepts integers too
  const std::string& text(const std::string& key) const;
  std::vector<std::int64_t> integers(const std::string& key) const;
  std::vector<double> numbers(const std::string& key) const;
  std::vector<std::string> texts(const std::string& key) const;
  const Params& plugin(const std::string& key) const;  // nested plugin options

  const std::map<std::string, Value>& values() const { return values_; }
  // Dotted-path view ("model.d_model" -> "768"), nested plugins as "model" -> name.
  std::map<std::string, std::string> flatten(const std::string& prefix = "") const;

 private:
  std::string plugin_name_;
  std::map<std::string, Value> values_;
};

}  // namespace runner
