#pragma once
#include <string>
#include <vector>

namespace runner {

// Levenshtein distance, for "did you mean" hints.
size_t edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `word`, or "" if none is plausibly a typo of it.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);
// "; did you mean 'x'?" or "; valid: a, b, c" when nothing is close.
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace runner
