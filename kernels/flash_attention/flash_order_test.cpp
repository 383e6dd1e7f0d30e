// The kernels' block order (tile_scheduler.hpp) on CPU; on a GPU, that the order changes no
// result and that the backward's delta pass matches its tensor-op formula.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "flash_attention.hpp"
#include "flash_test_support.hpp"
#include "tile_scheduler.hpp"
#ifdef RUNNER_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "common/dtype.hpp"
#include "flash_launch.hpp"
#endif

namespace {

namespace detail = kernels::flash::detail;
using flash_test::kCausal;

TEST(TileOrder, EveryTileOfEveryHeadOnceLongestFirstWithinAGroup) {
  for (int tiles : {1, 3, 32}) {
    for (int bh : {1, 5, 16}) {
      for (int group : {1, 2, 3, 16}) {
        const int g = group > bh ? bh : group;
        std::set<std::pair<int, int>> seen;
        int last_group = -1, last_rank = -1;
        for (int block = 0; block < tiles * bh; ++block) {
          const detail::TileSlot s = detail::tile_slot(block, tiles, bh, g);
          ASSERT_GE(s.rank, 0);
          ASSERT_LT(s.rank, tiles);
          ASSERT_GE(s.head, 0);
          ASSERT_LT(s.head, bh);
          EXPECT_TRUE(seen.insert({s.rank, s.head}).second) << "tile " << s.rank << " head " << s.head << " twice";
          const int head_group = s.head / g < bh / g ? s.head / g : (bh / g > 0 ? bh / g - 1 : 0);
          EXPECT_GE(head_group, last_group) << "groups go in order";
          if (head_group == last_group) EXPECT_GE(s.rank, last_rank) << "within a group, longer tiles first";
          last_group = head_group;
          last_rank = s.rank;
        }
        EXPECT_EQ(static_cast<int>(seen.size()), tiles * bh);
      }
    }
  }
}

TEST(TileOrder, LastGroupTakesTheHeadsLeftOver) {
  // 16 heads in groups of 3: 3, 3, 3, 3 and 4 (not a last group of 1).
  int heads_in_last = 0;
  for (int block = 4 * 3 * 7; block < 16 * 7; ++block) {  // after four groups of 3 heads x 7 tiles
    const detail::TileSlot s = detail::tile_slot(block, 7, 16, 3);
    EXPECT_GE(s.head, 12);
    if (block < 4 * 3 * 7 + 4) EXPECT_EQ(s.rank, 0) << "the four heads' longest tiles come first";
    heads_in_last = s.head - 11 > heads_in_last ? s.head - 11 : heads_in_last;
  }
  EXPECT_EQ(heads_in_last, 4);
}

TEST(TileOrder, GroupOfOneIsHeadAfterHead) {
  for (int block = 0; block < 4 * 3; ++block) {
    const detail::TileSlot s = detail::tile_slot(block, 4, 3, 1);
    EXPECT_EQ(s.head, block / 4);
    EXPECT_EQ(s.rank, block % 4);
  }
}

TEST(TileOrder, GroupsFillHalfTheL2) {
  const long long l2 = 50LL << 20;
  EXPECT_EQ(detail::heads_per_group(16, 8LL << 20, l2, 0), 3);   // seq 16384, d 128: K and V are 8 MiB a head
  EXPECT_EQ(detail::heads_per_group(16, 2LL << 20, l2, 0), 12);  // seq 4096
  EXPECT_EQ(detail::heads_per_group(4, 1LL << 10, l2, 0), 4);    // never more than bh
  EXPECT_EQ(detail::heads_per_group(16, 1LL << 40, l2, 0), 1);   // never less than 1
  EXPECT_EQ(detail::heads_per_group(16, 8LL << 20, l2, 1), 1);   // the override wins
  EXPECT_EQ(detail::heads_per_group(2, 8LL << 20, l2, 7), 2);
}

TEST(TileOrder, WithoutAMaskNoMoreHeadsThanTheBlocksInFlightCover) {
  // 132 SMs, one block each; seq 2048 in 128-key tiles = 16 tiles a head: 9 heads run at once.
  EXPECT_EQ(detail::cap_to_heads_in_flight(48, 16, 132, /*causal=*/false, 0), 9);
  EXPECT_EQ(detail::cap_to_heads_in_flight(6, 64, 132, false, 0), 3);     // seq 8192: 64 tiles a head
  EXPECT_EQ(detail::cap_to_heads_in_flight(4, 16, 132, false, 0), 4);     // never more than the L2 group
  EXPECT_EQ(detail::cap_to_heads_in_flight(16, 1024, 132, false, 0), 1);  // a head has more tiles than SMs
  EXPECT_EQ(detail::cap_to_heads_in_flight(16, 16, 264, false, 0), 16);   // two blocks an SM: 17, capped at 16
}

TEST(TileOrder, CausalOrRequestedGroupsAreNotCapped) {
  EXPECT_EQ(detail::cap_to_heads_in_flight(48, 16, 132, /*causal=*/true, 0), 48);  // longest-first wants them all
  EXPECT_EQ(detail::cap_to_heads_in_flight(48, 16, 132, false, 48), 48);          // the head_group option wins
  EXPECT_EQ(detail::cap_to_heads_in_flight(48, 0, 132, false, 0), 48);            // nothing to divide by
}

#ifdef RUNNER_WITH_CUDA
// The bulk-dQ backward's accumulator layout: every (head, row, column) has its own float, the
// rows of a head fill whole 64 x 64 chunks, and each 8-column block stays contiguous (the
// conversion reads four floats at once; the delta pass zeroes eight).
// The d 64 forward's query tile: 64 rows (two blocks per SM) where 192-row tiles would leave SMs
// idle (few tiles), 192 where there are many; an explicit choice wins.
TEST(TileOrder, D64ForwardTakesTheTileWithTheShorterMakespan) {
  EXPECT_EQ(detail::d64_consumer_warpgroups(2048, 16, 132, 0, 0), 1);    // 512 tiles of 64: 2 x 0.95 < 2 x 1.24
  EXPECT_EQ(detail::d64_consumer_warpgroups(1024, 16, 132, 0, 0), 1);    // one round either way: the shorter tile
  EXPECT_EQ(detail::d64_consumer_warpgroups(2048, 64, 132, 0, 0), 3);    // 704 tiles of 192: 6 x 1.24 < 8 x 0.95
  EXPECT_EQ(detail::d64_consumer_warpgroups(2048, 128, 132, 0, 0), 3);   // 1408 tiles: 11 x 1.24 < 16 x 0.95
  EXPECT_EQ(detail::d64_consumer_warpgroups(16384, 16, 132, 0, 0), 3);   // 1376 tiles: 11 x 1.24 < 16 x 0.95
  EXPECT_EQ(detail::d64_consumer_warpgroups(2048, 16, 132, 192, 0), 3);  // asked for
  EXPECT_EQ(detail::d64_consumer_warpgroups(16384, 16, 132, 128, 0), 2);
  EXPECT_EQ(detail::d64_consumer_warpgroups(16384, 16, 132, 64, 0), 1);
  // A short sliding window: 128 rows, whatever the grid; a long one is sized as causal.
  EXPECT_EQ(detail::d64_consumer_warpgroups(16384, 16, 132, 0, 256), 2);
  EXPECT_EQ(detail::d64_consumer_warpgroups(2048, 16, 132, 0, detail::kShortWindow), 2);
  EXPECT_EQ(detail::d64_consumer_warpgroups(16384, 16, 132, 0, detail::kShortWindow + 1), 3);
  EXPECT_EQ(detail::d64_consumer_warpgroups(2048, 16, 132, 0, 4096), 1);
  EXPECT_EQ(detail::d64_consumer_warpgroups(16384, 16, 132, 192, 256), 3);  // asked for
}

TEST(DqTiledLayout, EveryElementOnceInsideTheHeadsChunks) {
  for (int d_kernel : {64, 128}) {
    const int bh = 3, lq = 130, q_tiles = (lq + 63) / 64;
    const long long size = 1LL * bh * q_tiles * 64 * d_kernel;
    std::set<long long> seen;
    for (int h = 0; h < bh; ++h)
      for (int row = 0; row < lq; ++row)
        for (int col = 0; col < d_kernel; ++col) {
          const long long at = detail::dq_tiled_offset(h, row, col, q_tiles, d_kernel);
          ASSERT_TRUE(at >= 0 && at < size) << "d " << d_kernel << " head " << h << " row " << row << " col " << col;
          ASSERT_TRUE(seen.insert(at).second) << "d " << d_kernel << " head " << h << " row " << row << " col " << col;
          if (col % 8 != 0) EXPECT_EQ(at, detail::dq_tiled_offset(h, row, col - 1, q_tiles, d_kernel) + 1);
          // a head's rows stay inside its own chunks
          EXPECT_EQ(at / (1LL * q_tiles * 64 * d_kernel), h);
        }
  }
}

class FlashOrderGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// Each output element is computed by one block whatever the order, so outputs repeat bit for
// bit across group sizes (dQ of the fused wgmma backward is summed with atomics: close only).
TEST_F(FlashOrderGpu, HeadGroupsChangeNoResult) {
  const auto seed = static_cast<std::uint64_t>(std::rand());
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  torch::manual_seed(seed);
  const auto opts = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  for (int d : {64, 128}) {
    auto q = torch::randn({5, 300, d}, opts), k = torch::randn({5, 300, d}, opts), v = torch::randn({5, 300, d}, opts);
    auto dout = torch::randn({5, 300, d}, opts);
    for (auto family : {kernels::flash::KernelFamily::mma_sync, kernels::flash::KernelFamily::automatic}) {
      std::vector<torch::Tensor> outs, dks, dvs, dqs;
      for (int group : {1, 2, 5}) {
        kernels::flash::Options o;
        o.family = family;
        o.head_group = group;
        auto fwd = kernels::flash::forward(q, k, v, kCausal, o);
        auto g = kernels::flash::backward(q, k, v, fwd.out, dout, fwd.lse, kCausal, o);
        outs.push_back(fwd.out);
        dks.push_back(g.dk);
        dvs.push_back(g.dv);
        dqs.push_back(g.dq.to(torch::kFloat));
      }
      for (std::size_t i = 1; i < outs.size(); ++i) {
        SCOPED_TRACE("d " + std::to_string(d) + " family " + kernels::flash::to_string(family) + " group index " +
                     std::to_string(i));
        EXPECT_TRUE(torch::equal(outs[i], outs[0]));
        EXPECT_TRUE(torch::equal(dks[i], dks[0]));
        EXPECT_TRUE(torch::equal(dvs[i], dvs[0]));
        EXPECT_LT(((dqs[i] - dqs[0]).norm() / dqs[0].norm()).item<double>(), 1e-2);
      }
    }
  }
}

// delta = rowsum(out * dout) in fp32 and the zeroed buffer, against the tensor-op formula, with
// O a [batch, seq, heads, d] slice of a wider buffer and dO contiguous.
TEST_F(FlashOrderGpu, DeltaPassMatchesTheTensorOpFormula) {
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    for (int d : {16, 32, 64, 80, 96, 128}) {
      const auto opts = torch::TensorOptions().dtype(dtype).device(torch::kCUDA);
      const int batch = 3, seq = 77, heads = 2, zeroed_cols = d <= 64 ? 64 : 128;
      const long rows = batch * heads * seq;
      auto wide = torch::randn({batch, seq, heads, 2 * d}, opts);
      auto o = wide.narrow(3, d, d), dout = torch::randn({batch, seq, heads, d}, opts);
      auto delta = torch::full({rows}, std::nanf(""), opts.dtype(torch::kFloat));
      auto zeroed = torch::full({rows, zeroed_cols}, std::nanf(""), opts.dtype(torch::kFloat));
      auto layout = [](const torch::Tensor& t) {
        return detail::Layout{t.stride(0), t.stride(2), t.stride(1), static_cast<int>(t.size(2))};
      };
      detail::DeltaArgs a{};
      a.out = o.data_ptr(), a.dout = dout.data_ptr(), a.out_at = layout(o), a.dout_at = layout(dout);
      a.delta = delta.data_ptr<float>(), a.zeroed = zeroed.data_ptr<float>();
      a.bh = batch * heads, a.lq = seq, a.d = d, a.zeroed_cols = zeroed_cols;
      a.dtype = kernels::dtype_of(o, "test");
      detail::launch_backward_delta(a, c10::cuda::getCurrentCUDAStream());
      // [batch, heads, seq] rows, as the kernels index delta
      const auto want = (o.to(torch::kDouble) * dout.to(torch::kDouble)).sum(-1).transpose(1, 2).reshape({rows});
      const double err = ((delta.to(torch::kDouble) - want).norm() / want.norm()).item<double>();
      EXPECT_LT(err, 1e-6) << "dtype " << dtype << " d " << d;
      EXPECT_TRUE(torch::equal(zeroed, torch::zeros_like(zeroed))) << "dtype " << dtype << " d " << d;
      // The bulk-dQ buffer: every element a row < seq reads is zeroed, in dq_tiled_offset's layout.
      const int q_tiles = (seq + 63) / 64;
      auto tiled = torch::full({batch * heads * q_tiles * 64 * zeroed_cols}, std::nanf(""), opts.dtype(torch::kFloat));
      a.zeroed = tiled.data_ptr<float>(), a.zeroed_tiled = true;
      detail::launch_backward_delta(a, c10::cuda::getCurrentCUDAStream());
      const auto host = tiled.cpu();
      const float* z = host.data_ptr<float>();
      long bad = 0;
      for (int h = 0; h < batch * heads; ++h)
        for (int row = 0; row < seq; ++row)
          for (int col = 0; col < zeroed_cols; ++col)
            bad += z[detail::dq_tiled_offset(h, row, col, q_tiles, zeroed_cols)] != 0.f;
      EXPECT_EQ(bad, 0) << "tiled: dtype " << dtype << " d " << d;
    }
  }
}
#endif

}  // namespace
