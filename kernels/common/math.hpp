// Constants the kernels of kernels/ share (host and device code).
#pragma once

namespace kernels {

// log2(e): softmax kernels scale scores by it so that exp(x) becomes the faster exp2.
constexpr float kLog2e = 1.4426950408889634f;

}  // namespace kernels
