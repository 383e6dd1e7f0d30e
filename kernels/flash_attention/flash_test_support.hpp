// Helpers the flash-attention tests share: a fresh seed (printed), the relative error
// (tests/support/test_random.hpp), and the message of the c10::Error a call throws.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "mask.hpp"
#include "test_random.hpp"

namespace flash_test {

using test_support::fresh_seed;
using test_support::rel_err;

inline const kernels::flash::Mask kCausal = kernels::flash::Mask::of(kernels::flash::MaskKind::causal);
inline const kernels::flash::Mask kNoMask = kernels::flash::Mask::of(kernels::flash::MaskKind::none);
// The tests' cases say causal or not.
inline kernels::flash::Mask causal_if(bool causal) { return causal ? kCausal : kNoMask; }
inline kernels::flash::Mask sliding_window(int keys) {
  return kernels::flash::Mask::of(kernels::flash::MaskKind::sliding_window, keys);
}

// The message of what fn throws (c10::Error without its backtrace), "" when it returns.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {  // the launchers' own errors
    return e.what();
  }
  return "";
}

}  // namespace flash_test
