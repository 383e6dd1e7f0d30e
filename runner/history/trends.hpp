// A static trends site from the history (like asv publish, without a server):
// index.html lists experiments; <experiment>.html has one SVG plot per point and
// metric over runs (oldest left), the median as a line, the noise band (the
// interquartile range of the samples, else mean +- std) shaded, and runs whose
// change from the previous run is a regression marked red. Every marker links
// to that run's records (runs/<id>.json, written alongside). The x axis names
// runs (id and start time), the y axis of non-negative metrics starts at zero,
// metrics constant in every run are named once instead of plotted, and smoke
// runs are left out (counted on the index) unless the filter asks for them.
// Filters above the charts pick a part and parameter values (#part=P&KEY=V in
// the address does the same, so a filtered view is a link).
#pragma once
#include <filesystem>

#include "history/store.hpp"

namespace runner::history {

// Returns the number of experiment pages written. filter: experiment, device,
// since, and limit (the newest `limit` runs per experiment; 0: all).
int write_trends_site(const HistoryStore& store, const RunFilter& filter, const std::filesystem::path& dir);

}  // namespace runner::history
