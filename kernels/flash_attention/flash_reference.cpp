#include "flash_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace kernels::flash::reference {
namespace {

void check(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, Tiles tiles) {
  TORCH_CHECK(q.dim() >= 2 && q.dim() == k.dim() && k.dim() == v.dim(),
              "flash_tiled: q, k, v need the same rank >= 2, got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(q.size(-1) == k.size(-1) && k.sizes() == v.sizes() &&
                  q.sizes().slice(0, q.dim() - 2) == k.sizes().slice(0, k.dim() - 2),
              "flash_tiled: shapes must be q [..., lq, d], k = v [..., lk, d]; got q ", q.sizes(), ", k ", k.sizes(),
              ", v ", v.sizes());
  TORCH_CHECK(tiles.query >= 16 && tiles.key >= 16, "flash_tiled: tiles must be at least 16x16, got ", tiles.query,
              "x", tiles.key);
  TORCH_CHECK(at::isFloatingType(q.scalar_type()) && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type(),
              "flash_tiled: q, k, v must share one floating dtype");
}

at::ScalarType math_type(const at::Tensor& t) { return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

// Tile [q0, q0+nq) x [k0, k0+nk): true where the mask's rule hides the score.
at::Tensor tile_hidden(const Mask& mask, std::int64_t q0, std::int64_t nq, std::int64_t k0, std::int64_t nk,
                       const at::Device& dev) {
  const auto opts = at::TensorOptions().dtype(at::kLong).device(dev);
  const at::Tensor key = at::arange(k0, k0 + nk, opts).unsqueeze(0), query = at::arange(q0, q0 + nq, opts).unsqueeze(1);
  at::Tensor hide = key > query;
  if (mask.windowed()) hide = hide | (key <= query - mask.window);
  return hide;
}

}  // namespace

ForwardResult forward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, const Mask& mask_in,
                      Tiles tiles) {
  check(q_in, k_in, v_in, tiles);
  check_mask(mask_in);
  const auto mt = math_type(q_in);
  const at::Tensor q = q_in.to(mt), k = k_in.to(mt), v = v_in.to(mt);
  const std::int64_t lq = q.size(-2), lk = k.size(-2);
  const Mask mask = mask_in.with_lengths(static_cast<int>(lq), static_cast<int>(lk));
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor out = at::empty_like(q);
  std::vector<std::int64_t> lse_shape(q.sizes().begin(), q.sizes().end() - 1);
  at::Tensor lse = at::empty(lse_shape, q.options());

  for (std::int64_t q0 = 0; q0 < lq; q0 += tiles.query) {
    const std::int64_t nq = std::min(tiles.query, lq - q0);
    const at::Tensor qi = q.narrow(-2, q0, nq);
    std::vector<std::int64_t> row_shape(lse_shape);
    row_shape.back() = nq;
    row_shape.push_back(1);
    at::Tensor m = at::full(row_shape, -inf, q.options());
    at::Tensor l = at::zeros(row_shape, q.options());
    at::Tensor acc = at::zeros_like(qi);
    const TileRange keys = mask.key_tiles<true>(static_cast<int>(q0), static_cast<int>(nq), static_cast<int>(tiles.key));
    for (std::int64_t k0 = keys.begin * tiles.key; k0 < std::int64_t{keys.end} * tiles.key; k0 += tiles.key) {
      const std::int64_t nk = std::min(tiles.key, lk - k0);
      at::Tensor s = at::matmul(qi, k.narrow(-2, k0, nk).transpose(-2, -1)) * scale;
      if (mask.rule_crosses<true>(static_cast<int>(q0), static_cast<int>(nq), static_cast<int>(k0), static_cast<int>(nk)))
        s = s.masked_fill(tile_hidden(mask, q0, nq, k0, nk, q.device()), -inf);
      const at::Tensor m_new = at::maximum(m, std::get<0>(s.max(-1, true)));
      // Rows with every key masked so far keep m = -inf: subtract 0 there, not -inf (no NaN).
      const at::Tensor base = at::where(at::isinf(m_new), at::zeros_like(m_new), m_new);
      const at::Tensor p = at::exp(s - base);
      const at::Tensor alpha = at::exp(m - base);
      l = alpha * l + p.sum(-1, true);
      // The kernels cast P to the input dtype before P V; the reference does the same.
      acc = alpha * acc + at::matmul(p.to(q_in.scalar_type()).to(mt), v.narrow(-2, k0, nk));
      m = m_new;
    }
    out.narrow(-2, q0, nq).copy_(at::where(l > 0, acc / l, at::zeros_like(acc)));
    lse.narrow(-1, q0, nq).copy_(at::where(l > 0, m + at::log(l), at::full_like(l, inf)).squeeze(-1));
  }
  return {out.to(q_in.scalar_type()), lse.to(at::kFloat)};
}

Gradients backward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, const at::Tensor& out,
                   const at::Tensor& dout_in, const at::Tensor& lse_in, const Mask& mask_in, Tiles tiles) {
  check(q_in, k_in, v_in, tiles);
  check_mask(mask_in);
  const auto mt = math_type(q_in);
  const at::Tensor q = q_in.to(mt), k = k_in.to(mt), v = v_in.to(mt), dout = dout_in.to(mt);
  const at::Tensor lse = lse_in.to(mt).unsqueeze(-1);
  const std::int64_t lq = q.size(-2), lk = k.size(-2);
  const Mask mask = mask_in.with_lengths(static_cast<int>(lq), static_cast<int>(lk));
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const at::Tensor delta = (out.to(mt) * dout).sum(-1, true);
  at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);

  for (std::int64_t k0 = 0; k0 < lk; k0 += tiles.key) {
    const std::int64_t nk = std::min(tiles.key, lk - k0);
    const at::Tensor kj = k.narrow(-2, k0, nk), vj = v.narrow(-2, k0, nk);
    at::Tensor dkj = dk.narrow(-2, k0, nk), dvj = dv.narrow(-2, k0, nk);
    const TileRange queries = mask.query_tiles<true>(static_cast<int>(k0), static_cast<int>(nk), static_cast<int>(tiles.query));
    for (std::int64_t q0 = queries.begin * tiles.query; q0 < std::int64_t{queries.end} * tiles.query; q0 += tiles.query) {
      const std::int64_t nq = std::min(tiles.query, lq - q0);
      const at::Tensor qi = q.narrow(-2, q0, nq), doi = dout.narrow(-2, q0, nq);
      at::Tensor p = at::exp(at::matmul(qi, kj.transpose(-2, -1)) * scale - lse.narrow(-2, q0, nq));
      if (mask.rule_crosses<true>(static_cast<int>(q0), static_cast<int>(nq), static_cast<int>(k0), static_cast<int>(nk)))
        p = p.masked_fill(tile_hidden(mask, q0, nq, k0, nk, q.device()), 0.0);
      dvj.add_(at::matmul(p.transpose(-2, -1), doi));
      const at::Tensor dp = at::matmul(doi, vj.transpose(-2, -1));
      const at::Tensor ds = p * (dp - delta.narrow(-2, q0, nq));
      dq.narrow(-2, q0, nq).add_(at::matmul(ds, kj), scale);
      dkj.add_(at::matmul(ds.transpose(-2, -1), qi), scale);
    }
  }
  const auto t = q_in.scalar_type();
  return {dq.to(t), dk.to(t), dv.to(t)};
}

}  // namespace kernels::flash::reference
