// forward_bshd / backward_bshd: the host side of a launch. Views the kernels read in place or
// canonical copies (mma_sync, fp32), the launch arguments (flash_launch.hpp) and the backward's
// delta pass; without CUDA both throw one clear error.
#include <cmath>
#include <cstdint>
#include <tuple>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "flash_attention.hpp"
#include "flash_checks.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "common/dtype.hpp"
#include "flash_launch.hpp"
#endif

namespace kernels::flash {

using detail::check_bshd;

#ifdef RUNNER_WITH_CUDA
namespace {

// A [batch, seq, heads, d] view as the kernels read it, or why it cannot be read in place.
bool readable_in_place(const at::Tensor& t) {
  const auto elem = static_cast<std::int64_t>(t.element_size());
  return t.stride(3) == 1 && reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0 &&
         (t.stride(0) * elem) % 16 == 0 && (t.stride(1) * elem) % 16 == 0 && (t.stride(2) * elem) % 16 == 0;
}

// A contiguous tensor can still start off a 16-byte boundary (a view at an odd offset):
// clone, not contiguous(), which would return it as it is.
at::Tensor in_place_or_copy(const at::Tensor& t) {
  return readable_in_place(t) ? t : t.clone(at::MemoryFormat::Contiguous);
}

detail::Layout layout_of(const at::Tensor& t) {
  detail::Layout l;
  l.batch = t.stride(0);
  l.row = t.stride(1);
  l.head = t.stride(2);
  l.heads = static_cast<int>(t.size(2));
  return l;
}

// The head dim the kernels of a family are built for that covers d.
int kernel_head_dim(std::int64_t d, bool wgmma) {
  if (wgmma) return d <= 64 ? 64 : 128;
  for (int k : {16, 32, 64}) if (d <= k) return k;
  return 128;
}

// [batch, seq, heads, d] -> contiguous [batch, heads, seq, d_kernel] (columns d.. zero), the
// layout the mma_sync and fp32 kernels read; no copy where t already is that.
at::Tensor canonical(const at::Tensor& t, int d_kernel) {
  at::Tensor c = t.permute({0, 2, 1, 3});
  if (d_kernel > t.size(3)) c = at::constant_pad_nd(c, {0, d_kernel - t.size(3)});
  c = c.contiguous();
  return reinterpret_cast<std::uintptr_t>(c.data_ptr()) % 16 == 0 ? c : c.clone();
}

detail::Layout canonical_layout(const at::Tensor& c) {  // c: contiguous [batch, heads, seq, d_kernel]
  return layout_of(c.permute({0, 2, 1, 3}));
}

// Writes the [batch, heads, seq, d_kernel] result c into dst [batch, seq, heads, d] unless
// c already is dst's memory.
void copy_back(const at::Tensor& dst, const at::Tensor& c) {
  if (c.data_ptr() == dst.data_ptr()) return;
  dst.copy_(c.narrow(3, 0, dst.size(3)).permute({0, 2, 1, 3}));
}

// Where a kernel that reads canonical tensors writes dst: dst's own memory when it has
// that layout, else a fresh tensor.
at::Tensor canonical_output(const at::Tensor& dst, int d_kernel) {
  const at::Tensor c = dst.permute({0, 2, 1, 3});
  if (d_kernel == dst.size(3) && c.is_contiguous()) return c;
  return at::empty({dst.size(0), dst.size(2), dst.size(1), d_kernel}, dst.options());
}

// A gradient in x's own layout where x is dense (a head-split view of a [batch, heads, seq,
// d] tensor keeps it, so autograd hands it on without a copy), else [batch, seq, heads, d].
at::Tensor gradient_like(const at::Tensor& x) {
  at::Tensor g = at::empty_like(x);  // preserves dense strides
  return readable_in_place(g) ? g : at::empty_like(x, at::MemoryFormat::Contiguous);
}

bool use_wgmma(KernelFamily family, const at::Tensor& q) {
  if (family == KernelFamily::automatic) return resolve_kernel_family(family, q) == KernelFamily::wgmma;
  if (family != KernelFamily::wgmma) return false;
  const std::string why = wgmma_unsupported_reason(q);
  TORCH_CHECK(why.empty(), "flash attention: kernel family wgmma: ", why, "; use mma_sync or auto");
  return true;
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "flash attention: ", what, " kernel launch failed: ", cudaGetErrorString(err));
}

// A [batch, seq, heads * d] or [batch, seq, heads, d] tensor as [batch, seq, heads, d].
at::Tensor split_heads(const at::Tensor& t, const at::Tensor& like, const char* name) {
  TORCH_CHECK((t.dim() == 3 && t.size(0) == like.size(0) && t.size(1) == like.size(1) &&
               t.size(2) == like.size(2) * like.size(3)) ||
                  t.sizes() == like.sizes(),
              "flash attention backward: ", name, " must be [batch, lq, heads * d] or [batch, lq, heads, d] for q ",
              like.sizes(), ", got ", t.sizes());
  if (t.dim() == 4) return t;
  if (t.stride(2) == 1) return t.as_strided(like.sizes(), {t.stride(0), t.stride(1), like.size(3), 1});
  return t.contiguous().view(like.sizes());
}

// Options::Persistent as the launch arguments' Persistence.
detail::Persistence persistence(Options::Persistent p) {
  return p == Options::Persistent::on    ? detail::Persistence::on
         : p == Options::Persistent::off ? detail::Persistence::off
                                         : detail::Persistence::automatic;
}

}  // namespace

ForwardResult forward_bshd(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, const Mask& mask,
                           const Options& options) {
  check_bshd(q_in, k_in, v_in);
  check_mask(mask);
  const c10::cuda::CUDAGuard guard(q_in.device());
  const std::int64_t batch = q_in.size(0), lq = q_in.size(1), heads = q_in.size(2), d = q_in.size(3),
                     lk = k_in.size(1);
  const bool wgmma = use_wgmma(options.family, q_in);
  const int dk = kernel_head_dim(d, wgmma);
  ForwardResult r;
  r.out = at::empty({batch, lq, heads * d}, q_in.options());
  r.lse = at::empty({batch, heads, lq}, q_in.options().dtype(at::kFloat));
  const at::Tensor out4 = r.out.view({batch, lq, heads, d});

  detail::ForwardArgs a{};
  at::Tensor q, k, v, out;
  if (wgmma) {
    q = in_place_or_copy(q_in), k = in_place_or_copy(k_in), v = in_place_or_copy(v_in), out = out4;
    a.q_at = layout_of(q), a.k_at = layout_of(k), a.v_at = layout_of(v), a.out_at = layout_of(out);
  } else {
    q = canonical(q_in, dk), k = canonical(k_in, dk), v = canonical(v_in, dk), out = canonical_output(out4, dk);
    a.q_at = canonical_layout(q), a.k_at = canonical_layout(k), a.v_at = canonical_layout(v);
    a.out_at = canonical_layout(out);
  }
  a.q = q.data_ptr(), a.k = k.data_ptr(), a.v = v.data_ptr(), a.out = out.data_ptr();
  a.lse = r.lse.data_ptr<float>();
  a.bh = static_cast<int>(batch * heads), a.lq = static_cast<int>(lq), a.lk = static_cast<int>(lk);
  a.d = static_cast<int>(d), a.d_kernel = dk;
  a.mask = mask.with_lengths(a.lq, a.lk);
  a.dtype = kernels::dtype_of(q, "flash attention");
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  a.wgmma = wgmma;
  // auto: warp-specialized, 1.16-1.38x the pipelined forward on every shape measured
  // (git show 46d21d9:reports/flash_forward_schedules/, H100).
  const ForwardSchedule schedule = options.forward_schedule == ForwardSchedule::automatic
                                       ? ForwardSchedule::warp_specialized
                                       : options.forward_schedule;
  a.pipelined = schedule != ForwardSchedule::serial;
  a.warp_specialized = schedule == ForwardSchedule::warp_specialized;
  a.tma = options.tma_loads;
  a.pingpong = options.pingpong;
  a.persistent = persistence(options.persistent_forward);
  a.query_tile = options.forward_query_tile;
  // The persistent grid's tile counter (zeroed by the launch when it uses it).
  at::Tensor tile_counter;
  if (wgmma && a.warp_specialized) {
    tile_counter = at::empty({1}, q_in.options().dtype(at::kInt));
    a.tile_counter = tile_counter.data_ptr<int>();
  }
  a.head_group = options.head_group;
  detail::launch_forward(a, c10::cuda::getCurrentCUDAStream());
  check_launch("forward");
  if (!wgmma) copy_back(out4, out);
  return r;
}

Gradients backward_bshd(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                        const at::Tensor& out_in, const at::Tensor& dout_in, const at::Tensor& lse, const Mask& mask,
                        const Options& options, const Gradients* into) {
  check_bshd(q_in, k_in, v_in);
  check_mask(mask);
  const std::int64_t batch = q_in.size(0), lq = q_in.size(1), heads = q_in.size(2), d = q_in.size(3),
                     lk = k_in.size(1);
  TORCH_CHECK(lse.scalar_type() == at::kFloat && lse.numel() == batch * heads * lq && lse.is_contiguous(),
              "flash attention backward: lse must be the forward's fp32 [batch, heads, lq] tensor");
  const c10::cuda::CUDAGuard guard(q_in.device());
  const at::Tensor out4 = split_heads(out_in.to(q_in.scalar_type()), q_in, "out");
  const at::Tensor dout4 = split_heads(dout_in.to(q_in.scalar_type()), q_in, "dout");
  Gradients g;
  if (into != nullptr) {
    for (auto [t, like, name] : {std::tuple{&into->dq, &q_in, "dq"}, std::tuple{&into->dk, &k_in, "dk"},
                                 std::tuple{&into->dv, &v_in, "dv"}}) {
      TORCH_CHECK(t->defined() && t->sizes() == like->sizes() && t->scalar_type() == like->scalar_type() &&
                      t->device() == like->device() && readable_in_place(*t),
                  "flash attention backward: into.", name, " must be a ", like->sizes(), " ", like->scalar_type(),
                  " view on ", like->device(), " with d contiguous and 16-byte aligned rows");
    }
    g = *into;
  } else {
    g = {gradient_like(q_in), gradient_like(k_in), gradient_like(v_in)};
  }
  const bool wgmma = use_wgmma(options.family, q_in);
  const BackwardSchedule schedule = options.backward_schedule;
  const bool fuse_dq = wgmma && schedule != BackwardSchedule::deterministic;
  const bool warp_specialized =
      schedule == BackwardSchedule::warp_specialized || schedule == BackwardSchedule::warp_specialized_bulk_dq;
  const int dk = kernel_head_dim(d, wgmma);
  // The bulk-dQ kernel adds whole 64-row tiles into a tiled buffer (flash_launch.hpp, dq_tiled_offset).
  const bool bulk_dq = fuse_dq && schedule == BackwardSchedule::warp_specialized_bulk_dq;
  const std::int64_t dq_rows = bulk_dq ? (lq + 63) / 64 * 64 : lq;

  detail::BackwardArgs a{};
  at::Tensor q, k, v, o, dout, dq, dkt, dv;
  if (wgmma) {
    q = in_place_or_copy(q_in), k = in_place_or_copy(k_in), v = in_place_or_copy(v_in);
    o = in_place_or_copy(out4), dout = in_place_or_copy(dout4);
    dq = g.dq, dkt = g.dk, dv = g.dv;
    a.q_at = layout_of(q), a.k_at = layout_of(k), a.v_at = layout_of(v), a.dout_at = layout_of(dout);
    a.dq_at = layout_of(dq), a.dk_at = layout_of(dkt), a.dv_at = layout_of(dv);
  } else {
    q = canonical(q_in, dk), k = canonical(k_in, dk), v = canonical(v_in, dk);
    o = canonical(out4, dk), dout = canonical(dout4, dk);
    dq = canonical_output(g.dq, dk), dkt = canonical_output(g.dk, dk), dv = canonical_output(g.dv, dk);
    a.q_at = canonical_layout(q), a.k_at = canonical_layout(k), a.v_at = canonical_layout(v);
    a.dout_at = canonical_layout(dout);
    a.dq_at = canonical_layout(dq), a.dk_at = canonical_layout(dkt), a.dv_at = canonical_layout(dv);
  }
  const auto dtype = kernels::dtype_of(q, "flash attention");
  const auto stream = c10::cuda::getCurrentCUDAStream();
  // delta_i = sum_d O_id dO_id in fp32 (the "D" of the FlashAttention-2 paper), and the
  // fused backward's fp32 dQ buffer zeroed, in one pass over O and dO.
  const at::Tensor delta = at::empty({batch * heads, lq}, q.options().dtype(at::kFloat));
  at::Tensor dq_accum;
  if (fuse_dq) dq_accum = at::empty({batch * heads * dq_rows, dk}, q.options().dtype(at::kFloat));
  detail::DeltaArgs da{};
  da.out = o.data_ptr(), da.dout = dout.data_ptr();
  da.out_at = wgmma ? layout_of(o) : canonical_layout(o), da.dout_at = a.dout_at;
  da.delta = delta.data_ptr<float>(), da.zeroed = fuse_dq ? dq_accum.data_ptr<float>() : nullptr;
  da.bh = static_cast<int>(batch * heads), da.lq = static_cast<int>(lq);
  da.d = wgmma ? static_cast<int>(d) : dk, da.zeroed_cols = dk;
  da.dtype = dtype;
  da.zeroed_tiled = bulk_dq;
  // The warp-specialized backward's kernels launch as programmatic dependents of each other
  // (dependent_launch.cuh: each one's launch and prologue under the last blocks of the one before;
  // measured in git show 46d21d9:reports/flash_benchmarking/runs/v24_dependent_launch), so no memset sits between
  // them: the delta pass zeroes the persistent grid's tile counter.
  at::Tensor tile_counter;
  const bool chained = wgmma && warp_specialized;
  if (chained) {
    tile_counter = at::empty({1}, q.options().dtype(at::kInt));
    da.counter = tile_counter.data_ptr<int>();
  }
  detail::launch_backward_delta(da, stream);
  check_launch("backward delta");

  a.q = q.data_ptr(), a.k = k.data_ptr(), a.v = v.data_ptr(), a.dout = dout.data_ptr();
  a.lse = lse.data_ptr<float>(), a.delta = delta.data_ptr<float>();
  a.dq = dq.data_ptr(), a.dk = dkt.data_ptr(), a.dv = dv.data_ptr();
  a.bh = static_cast<int>(batch * heads), a.lq = static_cast<int>(lq), a.lk = static_cast<int>(lk);
  a.d = static_cast<int>(d), a.d_kernel = dk;
  a.mask = mask.with_lengths(a.lq, a.lk);
  a.dtype = dtype;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  a.wgmma = wgmma;
  a.head_group = options.head_group;
  if (fuse_dq) a.dq_accum = dq_accum.data_ptr<float>();
  a.warp_specialized = warp_specialized;
  a.bulk_dq = bulk_dq;
  a.pingpong = options.backward_pingpong;
  a.persistent = persistence(options.persistent_backward);
  if (tile_counter.defined()) a.tile_counter = tile_counter.data_ptr<int>();
  a.counter_zeroed = chained;
  a.dependent_launch = chained;
  detail::launch_backward(a, stream);
  check_launch("backward");
  if (!wgmma) {
    copy_back(g.dq, dq);
    copy_back(g.dk, dkt);
    copy_back(g.dv, dv);
  }
  return g;
}

#else

ForwardResult forward_bshd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask&,
                           const Options&) {
  check_bshd(q, k, v);
  TORCH_CHECK(false, "flash attention: this build has no CUDA (configure with a CUDA toolkit)");
}

Gradients backward_bshd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor&,
                        const at::Tensor&, const at::Tensor&, const Mask&, const Options&, const Gradients*) {
  check_bshd(q, k, v);
  TORCH_CHECK(false, "flash attention: this build has no CUDA (configure with a CUDA toolkit)");
}

#endif

}  // namespace kernels::flash
