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

}  // namespace kernels::flash::detail
