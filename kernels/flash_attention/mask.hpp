// Which scores a query may not see, and the tile ranges that follow from it: the one rule every
// flash kernel (mma_sync, fp32, wgmma, warp-specialized; forward and backward), the tensor-op
// reference and the host read (as FlashAttention-3's hopper/mask.h and block.h).
//
// Query i sees key j when j < lk and
//   none:            always;
//   causal:          j <= i (top-left aligned, as attention/naive);
//   sliding_window:  i - window < j <= i (itself and the window - 1 keys before it).
// A row that sees no key gives zeros and L = +inf.
//
// Every kernel is built twice: kWindow = false compiles the window terms below away (none and
// causal: the code is what it was with a `bool causal`); with kWindow = true they are read at run
// time and still follow `kind`, so host code may pass true for any mask.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define RUNNER_FLASH_HD __host__ __device__ __forceinline__
#else
#define RUNNER_FLASH_HD inline
#endif

namespace kernels::flash {

enum class MaskKind : std::uint8_t { none, causal, sliding_window };

// min as the kernels wrote it before the Mask (CUDA's min on the device), so their prologues compile
// as they did.
RUNNER_FLASH_HD int min_int(int a, int b) {
#if defined(__CUDA_ARCH__)
  return min(a, b);
#else
  return a < b ? a : b;
#endif
}

// Tiles (or, from keys_seen, keys) begin .. end - 1; empty when end <= begin.
struct TileRange {
  int begin = 0, end = 0;
  RUNNER_FLASH_HD int size() const { return end > begin ? end - begin : 0; }
  // The tiles a kernel walks from `begin`: under a window the range may be empty (end < begin);
  // a none or causal range never is, so its kernels count end - begin without the compare.
  template <bool kWindow>
  RUNNER_FLASH_HD int count() const {
    return kWindow ? size() : end - begin;
  }
};

struct Mask {
  MaskKind kind = MaskKind::none;
  int window = 0;      // sliding_window: keys a query sees, itself included (>= 1)
  int lq = 0, lk = 0;  // query and key lengths (with_lengths; the host sets them from the tensors)

  static Mask of(MaskKind kind, int window = 0) { return {kind, window, 0, 0}; }
  Mask with_lengths(int queries, int keys) const { return {kind, window, queries, keys}; }

  // Keys right of the diagonal are hidden (causal and sliding_window).
  RUNNER_FLASH_HD bool causal() const { return kind != MaskKind::none; }
  RUNNER_FLASH_HD bool windowed() const { return kind == MaskKind::sliding_window; }

  // The rule alone, without the sequence ends.
  template <bool kWindow = false>
  RUNNER_FLASH_HD bool rule_hides(int query, int key) const {
    return (causal() && key > query) || (kWindow && windowed() && key <= query - window);
  }
  // Score (query, key) of a forward / dQ tile (rows are queries): keys past lk are hidden too.
  template <bool kWindow = false>
  RUNNER_FLASH_HD bool hidden(int query, int key) const {
    return key >= lk || rule_hides<kWindow>(query, key);
  }
  // The same for a dK/dV tile (rows are keys): queries past lq are hidden (their rows are zeros).
  template <bool kWindow = false>
  RUNNER_FLASH_HD bool hidden_dkdv(int query, int key) const {
    return query >= lq || rule_hides<kWindow>(query, key);
  }

  // Whether queries query0 .. query0 + queries - 1 against keys key0 .. key0 + keys - 1 hold a
  // score the rule hides: only such tiles (and those at the sequence ends) pay for masking.
  template <bool kWindow = false>
  RUNNER_FLASH_HD bool rule_crosses(int query0, int queries, int key0, int keys) const {
    return (causal() && key0 + keys - 1 > query0) || (kWindow && windowed() && key0 <= query0 + queries - 1 - window);
  }
  template <bool kWindow = false>
  RUNNER_FLASH_HD bool needs_mask(int query0, int queries, int key0, int keys) const {
    return key0 + keys > lk || rule_crosses<kWindow>(query0, queries, key0, keys);
  }
  // The keys query `query` sees, as one range: hidden(query, key) exactly when key is outside it
  // (FlashAttention-3's column limits), so a kernel masks a row with two compares an element.
  template <bool kWindow = false>
  RUNNER_FLASH_HD TileRange keys_seen(int query) const {
    const int end = causal() ? min_int(lk, query + 1) : lk;
    const int first = query - window + 1;
    return {kWindow && windowed() && first > 0 ? first : 0, end};
  }
  // The queries that see key `key`, as one range: hidden_dkdv(query, key) exactly when query is
  // outside it (a dK/dV tile's rows are keys).
  template <bool kWindow = false>
  RUNNER_FLASH_HD TileRange queries_seeing(int key) const {
    const int end = kWindow && windowed() ? min_int(lq, key + window) : lq;
    return {causal() ? key : 0, end};
  }
  template <bool kWindow = false>
  RUNNER_FLASH_HD bool needs_mask_dkdv(int query0, int queries, int key0, int keys) const {
    return query0 + queries > lq || rule_crosses<kWindow>(query0, queries, key0, keys);
  }

  // The key tiles (of `tile` keys) that queries query0 .. query0 + queries - 1 see any key of.
  // Without a window it starts at 0 and, for causal and lk >= 1, is never empty.
  template <bool kWindow = false>
  RUNNER_FLASH_HD TileRange key_tiles(int query0, int queries, int tile) const {
    const int end = causal() ? min_int(lk, query0 + queries) : lk;
    int begin = 0;
    if (kWindow && windowed()) {
      const int first = query0 - window + 1;
      begin = first > 0 ? first / tile : 0;
    }
    return {begin, (end + tile - 1) / tile};
  }
  // The query tiles (of `tile` queries, `lq` in all) that see any of keys key0 .. key0 + keys - 1.
  template <bool kWindow = false>
  RUNNER_FLASH_HD TileRange query_tiles(int key0, int keys, int tile) const {
    const int tiles = (lq + tile - 1) / tile;
    const int first = key0 / tile;
    TileRange r{causal() ? min_int(first, tiles) : 0, tiles};
    if (kWindow && windowed()) {
      const int last_key = min_int(key0 + keys, lk) - 1;
      const int last = (last_key + window - 1) / tile;  // the tile of the last query that sees last_key
      if (last + 1 < r.end) r.end = last + 1;
    }
    return r;
  }
};

}  // namespace kernels::flash
