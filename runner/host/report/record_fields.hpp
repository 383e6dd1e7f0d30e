// Reading fields of stored records, shared by table building and captions.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report.hpp"

namespace runner::report::detail {

// Strings as is, numbers in shortest form, anything else as compact JSON.
std::string render_value(const nlohmann::json& value);
// A key's value from the record's labels, else its params.
std::optional<std::string> lookup(const StoredRecord& record, const std::string& key);
// Author caption, what pivot cells hold, and the setup sentence computed from records.
std::string caption(const TableSpec& spec, const std::vector<const StoredRecord*>& records,
                    const std::set<std::string>& shown_keys);

}  // namespace runner::report::detail
