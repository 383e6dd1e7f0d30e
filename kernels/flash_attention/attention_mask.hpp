// runner::AttentionMask (the plugins' interface) as the kernels' Mask (mask.hpp).
#pragma once
#include "mask.hpp"
#include "runner/attention.hpp"

namespace kernels::flash {

inline Mask mask_of(const runner::AttentionMask& m) {
  switch (m.kind) {
    case runner::AttentionMask::Kind::causal: return Mask::of(MaskKind::causal);
    case runner::AttentionMask::Kind::sliding_window: return Mask::of(MaskKind::sliding_window, static_cast<int>(m.window));
    default: return Mask::of(MaskKind::none);
  }
}

}  // namespace kernels::flash
