// Which (tile, batch*head) a block of a flash kernel works on: the order blocks start in.
// Plain C++ (host and device), checked on CPU by the TileOrder tests.
//
// The kernels launch a 1-D grid of tiles x bh blocks, and the GPU starts blocks roughly in
// index order. Two things want different orders:
//  * Under a causal mask tiles differ in work (the last query tile sees every key tile, the
//    first sees one), so the longest tiles should start first over all heads (LPT). With
//    one head after another, the last head's longest tile started near the end and ran
//    alone: at 16 heads and seq 4096 that tail was about a third of the forward's time.
//  * Blocks of one head re-read that head's K and V (forward) or Q and dO (backward), so
//    the heads in flight at once should keep those in L2.
// So heads go in groups whose streamed operands fit in half the L2; inside a group, the
// longest tile of every head comes first, then the next longest, and so on. A group of 1
// is the plain head-after-head order.
#pragma once

#if defined(__CUDACC__)
#define RUNNER_TILE_ORDER_FN __host__ __device__ __forceinline__
#else
#define RUNNER_TILE_ORDER_FN inline
#endif

namespace kernels::flash::detail {

struct TileSlot {
  int rank;  // 0 = the group's longest tile under a causal mask (kernels map it to their tile index)
  int head;  // batch*head index
};

// Block `block` of a grid of tiles * bh blocks, heads in groups of `group`. The last group
// also takes the bh % group heads left over (group to 2 * group - 1 heads): a short last
// group would start its head's longest tile near the end with nothing to run beside it
// (16 heads in groups of 3 measured 4 % slower at seq 16384 than groups of 2 or 4).
RUNNER_TILE_ORDER_FN TileSlot tile_slot(int block, int tiles, int bh, int group) {
  const int per_group = group * tiles;
  const int groups = bh / group > 0 ? bh / group : 1;
  const int index = block / per_group < groups - 1 ? block / per_group : groups - 1;
  const int first_head = index * group;
  const int heads = index == groups - 1 ? bh - first_head : group;
  const int within = block - index * per_group;
  return {within / heads, first_head + within % heads};
}

// Heads per group: as many as keep `bytes_per_head` each within half of `l2_bytes` (the
// merged last group within all of it), at least 1, at most bh. `override_group` > 0 (RUNNER_FLASH_HEAD_GROUP) wins, for timing.
inline int heads_per_group(int bh, long long bytes_per_head, long long l2_bytes, int override_group) {
  long long g = override_group > 0 ? override_group : (bytes_per_head > 0 ? l2_bytes / 2 / bytes_per_head : bh);
  if (g < 1) g = 1;
  if (g > bh) g = bh;
  return static_cast<int>(g);
}

// Without a causal mask every tile is equally long, so interleaving heads buys nothing and only
// widens the working set: the blocks that run at once (`resident_blocks`, SMs x blocks per SM)
// then need no more heads than they cover, ceil(resident_blocks / tiles). With a mask the
// longest-first order wants every head of the group, so the L2 group stands. `group` is
// heads_per_group's answer; an override (head_group option) is passed through untouched.
// Measured (git show 46d21d9:reports/flash_head_group/, H100, d 64, seq 2048, batch 8, 16 heads): the L2 rule's 48
// heads ran the backward at an L2 hit rate of 64 %, 8 heads at 93 %.
inline int cap_to_heads_in_flight(int group, int tiles, long long resident_blocks, bool causal, int override_group) {
  if (causal || override_group > 0 || tiles < 1 || resident_blocks < 1) return group;
  const long long in_flight = (resident_blocks + tiles - 1) / tiles;
  return in_flight < group ? static_cast<int>(in_flight) : group;
}

// Consumer warpgroups of the warp-specialized forward at kernel head dim 64: `query_tile` 64 -> 1
// (two blocks per SM), 128 -> 2, 192 -> 3, else (0) 64 or 192 rows, whichever has the smaller
// makespan in 128-row tile times of one SM: ceil(tiles / slots) rounds on sms x 2 slots of 0.95
// (a 64-row tile on half an SM) or on sms slots of 1.24 (a 192-row tile). The costs are fitted
// to git show 46d21d9:reports/flash_d64_query_tile/runs/sixty_four_rows (64 rows 1.01-1.09x the 128-row block on
// every row there, so 128 is never the pick; 192 rows ahead on large grids). At batch 1, 16
// heads, seq 2048: 512 tiles of 64 rows, two rounds of 0.95, against 176 of 192, two of 1.24.
// Under a sliding window of at most kShortWindow keys a tile's work is its rows plus the window,
// so a 192-row tile is mostly edge (masked key tiles at both ends of its range) and 128 rows
// finish sooner (reports/flash_sliding_window, table query_tile).
inline constexpr int kShortWindow = 1024;
inline int d64_consumer_warpgroups(int lq, int bh, int sms, int query_tile, int window) {
  if (query_tile == 64 || query_tile == 128 || query_tile == 192) return query_tile / 64;
  if (window > 0 && window <= kShortWindow) return 2;
  auto rounds = [&](int tile_q, int slots) {
    return static_cast<double>((static_cast<long long>((lq + tile_q - 1) / tile_q) * bh + slots - 1) / slots);
  };
  return rounds(192, sms) * 1.24 < rounds(64, 2 * sms) * 0.95 ? 3 : 1;
}

#if defined(__CUDACC__)
// A persistent grid's next block of the order after `block`: with a tile counter (an int zeroed
// before the launch) the next one no block has taken yet, so blocks that drew short tiles take
// more (greedy longest first; a fixed stride left blocks 17-36 % apart in work under a causal
// mask, a Python model of the order) and the tiles in flight stay a window of the order (its
// head groups share the L2); without one (one block per tile) the next of its stride, which is
// past the end. Lane 0 draws; with whole_warp every lane of the warp calls and gets the answer.
__device__ __forceinline__ int next_block(int* counter, int block, bool whole_warp) {
  if (counter == nullptr) return block + static_cast<int>(gridDim.x);
  int next = 0;
  if (threadIdx.x % 32 == 0) next = static_cast<int>(gridDim.x) + atomicAdd(counter, 1);
  if (whole_warp) next = __shfl_sync(0xffffffffu, next, 0);
  return next;
}
#endif

}  // namespace kernels::flash::detail
