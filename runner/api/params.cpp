#include "runner/params.hpp"

#include <cstdio>
#include <stdexcept>

namespace runner {
namespace {

std::string format_number(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", d);
  return buf;
}

[[noreturn]] void wrong_type(const std::string& key, const char* wanted) {
  throw std::runtime_error("option '" + key + "' is not " + wanted);
}

}  // namespace

std::string Value::to_string() const {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_number(d); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const List& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + l[i].to_string();
      return out + "]";
    }
    std::string operator()(const std::shared_ptr<Params>& p) const {
      return p ? p->plugin_name() : "";
    }
  };
  return std::visit(Visitor{}, data);
}

const Value& Params::at(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    throw std::runtime_error("option '" + key + "' is not declared" +
                             (plugin_name_.empty() ? "" : " by plugin '" + plugin_name_ + "'"));
  }
  return it->second;
}

bool Params::flag(const std::string& key) const {
  const auto* b = std::get_if<bool>(&at(key).data);
  if (!b) wrong_type(key, "a bool");
  return *b;
}

std::int64_t Params::integer(const std::string& key) const {
  const auto* i = std::get_if<std::int64_t>(&at(key).data);
  if (!i) wrong_type(key, "an integer");
  return *i;
}

double Params::number(const std::string& key) const {
  const Value& v = at(key);
  if (const auto* d = std::get_if<double>(&v.data)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v.data)) return static_cast<double>(*i);
  wrong_type(key, "a number");
}

const std::string& Params::text(const std::string& key) const {
  const auto* s = std::get_if<std::string>(&at(key).data);
  if (!s) wrong_type(key, "a string");
  return *s;
}

namespace {
template <class Out, class Get>
std::vector<Out> list_of(const Value& v, const std::string& key, const char* what, Get get) {
  const auto* l = std::get_if<Value::List>(&v.data);
  if (!l) wrong_type(key, what);
  std::vector<Out> out;
  for (const Value& e : *l) out.push_back(get(e));
  return out;
}
}  // namespace

std::vector<std::int64_t> Params::integers(const std::string& key) const {
  return list_of<std::int64_t>(at(key), key, "a list of integers", [&](const Value& e) {
    const auto* i = std::get_if<std::int64_t>(&e.data);
    if (!i) wrong_type(key, "a list of integers");
    return *i;
  });
}

std::vector<double> Params::numbers(const std::string& key) const {
  return list_of<double>(at(key), key, "a list of numbers", [&](const Value& e) {
    if (const auto* d = std::get_if<double>(&e.data)) return *d;
    if (const auto* i = std::get_if<std::int64_t>(&e.data)) return static_cast<double>(*i);
    wrong_type(key, "a list of numbers");
  });
}

std::vector<std::string> Params::texts(const std::string& key) const {
  return list_of<std::string>(at(key), key, "a list of strings", [&](const Value& e) {
    const auto* s = std::get_if<std::string>(&e.data);
    if (!s) wrong_type(key, "a list of strings");
    return *s;
  });
}

const Params& Params::plugin(const std::string& key) const {
  const auto* p = std::get_if<std::shared_ptr<Params>>(&at(key).data);
  if (!p || !*p) wrong_type(key, "a plugin");
  return **p;
}

std::map<std::string, std::string> Params::flatten(const std::string& prefix) const {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : values_) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    out[path] = value.to_string();
    if (const auto* p = std::get_if<std::shared_ptr<Params>>(&value.data); p && *p) {
      for (auto& [k, v] : (*p)->flatten(path)) out[k] = v;
    }
  }
  return out;
}

}  // namespace runner
