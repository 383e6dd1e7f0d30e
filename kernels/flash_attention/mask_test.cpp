// The Mask (mask.hpp) against brute force over every score: a row's range of keys is what it
// sees, the tile ranges skip only tiles with no visible score and start and end on tiles that have
// one, needs_mask says exactly whether a tile holds a hidden score, and the kernels built without windows (kWindow = false) see the
// none and causal masks exactly as the windowed build does. Pure host code: runs without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mask.hpp"

namespace {

using kernels::flash::Mask;
using kernels::flash::MaskKind;
using kernels::flash::TileRange;

std::string name(const Mask& m) {
  return "kind " + std::to_string(static_cast<int>(m.kind)) + " window " + std::to_string(m.window) + " lq " +
         std::to_string(m.lq) + " lk " + std::to_string(m.lk);
}

std::vector<Mask> masks() {
  std::vector<Mask> all;
  for (int lq : {1, 7, 16, 37, 64, 100})
    for (int lk : {1, 9, 16, 50, 64, 100}) {
      all.push_back(Mask::of(MaskKind::none).with_lengths(lq, lk));
      all.push_back(Mask::of(MaskKind::causal).with_lengths(lq, lk));
      for (int w : {1, 2, 5, 16, 17, 64, 1000}) all.push_back(Mask::of(MaskKind::sliding_window, w).with_lengths(lq, lk));
    }
  return all;
}

// Whether query i sees key j, from the definition (mask.hpp's header comment).
bool sees(const Mask& m, int i, int j) {
  if (j >= m.lk) return false;
  if (m.kind == MaskKind::none) return true;
  if (j > i) return false;
  return m.kind == MaskKind::causal || j > i - m.window;
}

bool any_visible(const Mask& m, int q0, int nq, int k0, int nk) {
  for (int i = q0; i < q0 + nq && i < m.lq; ++i)
    for (int j = k0; j < k0 + nk; ++j)
      if (sees(m, i, j)) return true;
  return false;
}

TEST(FlashMask, HiddenIsTheDefinition) {
  for (const Mask& m : masks())
    for (int i = 0; i < m.lq + 3; ++i)
      for (int j = 0; j < m.lk + 3; ++j) {
        ASSERT_EQ(m.hidden<true>(i, j), !sees(m, i, j)) << name(m) << " (" << i << ", " << j << ")";
        Mask endless = m;  // the rule alone, without the end of the keys
        endless.lk = j + 1;
        ASSERT_EQ(m.hidden_dkdv<true>(i, j), i >= m.lq || !sees(endless, i, j))
            << name(m) << " (" << i << ", " << j << ")";
      }
}

// keys_seen, the one range a row keeps (the sm90 forward masks by it), is exactly what hidden leaves,
// also for rows past the queries (a tile's last rows) and in the builds without windows.
TEST(FlashMask, KeysSeenIsTheRangeHiddenLeaves) {
  for (const Mask& m : masks())
    for (int i = 0; i < m.lq + 3; ++i) {
      const TileRange seen = m.keys_seen<true>(i);
      for (int j = 0; j < m.lk + 130; ++j)
        ASSERT_EQ(m.hidden<true>(i, j), j < seen.begin || j >= seen.end) << name(m) << " (" << i << ", " << j << ")";
      if (m.windowed()) continue;
      const TileRange plain = m.keys_seen<false>(i);
      ASSERT_TRUE(plain.begin == seen.begin && plain.end == seen.end) << name(m) << " row " << i;
    }
}

// queries_seeing, a dK/dV row's (a key's) one range of queries, is what hidden_dkdv leaves.
TEST(FlashMask, QueriesSeeingIsTheRangeHiddenDkdvLeaves) {
  for (const Mask& m : masks())
    for (int j = 0; j < m.lk + 3; ++j) {
      const TileRange seen = m.queries_seeing<true>(j);
      for (int i = 0; i < m.lq + 130; ++i)
        ASSERT_EQ(m.hidden_dkdv<true>(i, j), i < seen.begin || i >= seen.end) << name(m) << " (" << i << ", " << j << ")";
      if (m.windowed()) continue;
      const TileRange plain = m.queries_seeing<false>(j);
      ASSERT_TRUE(plain.begin == seen.begin && plain.end == seen.end) << name(m) << " key " << j;
    }
}

TEST(FlashMask, KernelsWithoutWindowsSeeNoneAndCausalUnchanged) {
  for (const Mask& m : masks()) {
    if (m.windowed()) continue;
    for (int i = 0; i < m.lq + 3; ++i)
      for (int j = 0; j < m.lk + 3; ++j) ASSERT_EQ(m.hidden<false>(i, j), m.hidden<true>(i, j)) << name(m);
    for (int q0 = 0; q0 < m.lq; q0 += 16)
      for (int k0 = 0; k0 < m.lk; k0 += 16) {
        ASSERT_EQ(m.needs_mask<false>(q0, 16, k0, 16), m.needs_mask<true>(q0, 16, k0, 16)) << name(m);
        const TileRange a = m.key_tiles<false>(q0, 16, 16), b = m.key_tiles<true>(q0, 16, 16);
        ASSERT_TRUE(a.begin == b.begin && a.end == b.end) << name(m);
        const TileRange c = m.query_tiles<false>(k0, 16, 16), d = m.query_tiles<true>(k0, 16, 16);
        ASSERT_TRUE(c.begin == d.begin && c.end == d.end) << name(m);
      }
  }
}

TEST(FlashMask, NeedsMaskIsExact) {
  for (const Mask& m : masks())
    for (int tile : {1, 16, 64})
      for (int q0 = 0; q0 < m.lq; q0 += tile)
        for (int k0 = 0; k0 < m.lk; k0 += tile) {
          bool hidden = false, hidden_dkdv = false;
          for (int i = q0; i < q0 + tile; ++i)
            for (int j = k0; j < k0 + tile; ++j) {
              hidden = hidden || m.hidden<true>(i, j);
              hidden_dkdv = hidden_dkdv || m.hidden_dkdv<true>(i, j);
            }
          ASSERT_EQ(m.needs_mask<true>(q0, tile, k0, tile), hidden) << name(m) << " tile " << q0 << ", " << k0;
          ASSERT_EQ(m.needs_mask_dkdv<true>(q0, tile, k0, tile), hidden_dkdv) << name(m) << " tile " << q0 << ", " << k0;
        }
}

TEST(FlashMask, KeyTilesCoverEveryVisibleScoreAndNoMore) {
  for (const Mask& m : masks())
    for (int tq : {1, 16, 64})
      for (int tk : {1, 16, 64})
        for (int q0 = 0; q0 < m.lq; q0 += tq) {
          const TileRange r = m.key_tiles<true>(q0, tq, tk);
          const int tiles = (m.lk + tk - 1) / tk;
          for (int t = 0; t < tiles; ++t) {
            const bool inside = t >= r.begin && t < r.end;
            if (!inside) ASSERT_FALSE(any_visible(m, q0, tq, t * tk, tk)) << name(m) << " q0 " << q0 << " tile " << t;
          }
          if (r.size() > 0 && any_visible(m, q0, tq, 0, m.lk)) {  // tight where the tile sees anything
            EXPECT_TRUE(any_visible(m, q0, tq, r.begin * tk, tk)) << name(m) << " first tile, q0 " << q0;
            // Without lq's cut (the kernels' last query tile runs past lq), the last tile has a visible score.
            Mask open = m;
            open.lq = q0 + tq;
            EXPECT_TRUE(any_visible(open, q0, tq, (r.end - 1) * tk, tk)) << name(m) << " last tile, q0 " << q0;
          }
          EXPECT_LE(r.end, tiles) << name(m);
        }
}

TEST(FlashMask, QueryTilesCoverEveryVisibleScoreAndNoMore) {
  for (const Mask& m : masks())
    for (int tq : {1, 16, 64})
      for (int tk : {1, 16, 64})
        for (int k0 = 0; k0 < m.lk; k0 += tk) {
          const TileRange r = m.query_tiles<true>(k0, tk, tq);
          const int tiles = (m.lq + tq - 1) / tq;
          for (int t = 0; t < tiles; ++t) {
            const bool inside = t >= r.begin && t < r.end;
            if (!inside) ASSERT_FALSE(any_visible(m, t * tq, tq, k0, tk)) << name(m) << " k0 " << k0 << " tile " << t;
          }
          if (r.size() > 0 && m.causal() && any_visible(m, 0, m.lq, k0, tk)) {  // tight: the first tile, and the last where the window ends it
            EXPECT_TRUE(any_visible(m, r.begin * tq, tq, k0, tk)) << name(m) << " first tile, k0 " << k0;
            if (r.end < tiles)
              EXPECT_TRUE(any_visible(m, (r.end - 1) * tq, tq, k0, tk)) << name(m) << " last tile, k0 " << k0;
          }
          EXPECT_GE(r.begin, 0);
          EXPECT_LE(r.end, tiles) << name(m);
        }
}

}  // namespace
