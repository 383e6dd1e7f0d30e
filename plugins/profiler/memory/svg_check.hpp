// Test helpers: a tiny well-formedness check for the SVG we write (tags balance,
// attributes quoted) and attribute extraction. Not a general XML parser.
#pragma once
#include <string>
#include <vector>

namespace plugins::memory_profiler::testing {

// Empty when well-formed; otherwise what is wrong and where.
inline std::string xml_problem(const std::string& doc) {
  std::vector<std::string> open;
  std::size_t i = 0;
  while ((i = doc.find('<', i)) != std::string::npos) {
    const std::size_t end = doc.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string tag = doc.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?' || tag[0] == '!') continue;
    std::size_t quotes = 0;
    for (char c : tag) quotes += c == '"';
    if (quotes % 2 != 0) return "unbalanced quotes in <" + tag + ">";
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes " + (open.empty() ? "nothing" : open.back());
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n\t")));
    }
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

// Value of the first `name="..."` after the first occurrence of `element`.
inline std::string attribute_of(const std::string& doc, const std::string& element, const std::string& name) {
  const std::size_t at = doc.find("<" + element);
  if (at == std::string::npos) return "";
  const std::size_t key = doc.find(" " + name + "=\"", at);
  if (key == std::string::npos) return "";
  const std::size_t begin = key + name.size() + 3;
  return doc.substr(begin, doc.find('"', begin) - begin);
}

inline std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + what.size())) ++n;
  return n;
}

}  // namespace plugins::memory_profiler::testing
