#include "base/text_distance.hpp"

#include <algorithm>

namespace runner {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  // A word that is a prefix of a candidate ("warmup" of "warmup_steps") is a hit.
  for (const auto& c : candidates)
    if (word.size() >= 3 && c.rfind(word, 0) == 0) return c;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string best = closest_name(word, candidates);
  if (!best.empty()) return "; did you mean '" + best + "'?";
  if (candidates.empty()) return "";
  std::string all;
  for (const auto& c : candidates) all += (all.empty() ? "" : ", ") + c;
  return "; valid: " + all;
}

}  // namespace runner
