// Interleaved A/B measurement: both builds run alternately, several rounds a
// side, so that whatever drifts on the machine between two runs (a clock
// state, another job on a shared host) lands on both sides alike instead of
// reading as a change of one of them. Back-to-back compares (a scheduled run
// against last-good) cannot do this: their two runs are hours apart.
#pragma once
#include <string>
#include <vector>

#include "history/compare.hpp"

namespace runner::history {

// The order of 2 * rounds runs: A B B A A B B A ... (each pair mirrors the one
// before, so a drift linear in time adds about the same to both sides; exactly
// with an even number of rounds).
std::string interleaved_order(int rounds);

// One side from its rounds (each a Side of one run): per point and metric, the
// rounds' medians become the samples (center: their median; min and max: the
// extreme rounds; `rounds`: how many) and each round's best step `round_best`,
// which compare tests as rounds: a t over their logs, its variance pooled
// across the compare's points of that metric (compare.hpp). A round is the unit: a slow spell of the machine
// shifts all of a round's steps, so no rule over steps judges rounds. Single
// values (peak bytes) keep the median of the rounds. A point failed in any
// round is failed. Points missing from some round are left out of all.
Side merge_rounds(const std::vector<Side>& rounds, const std::string& spec);

}  // namespace runner::history
