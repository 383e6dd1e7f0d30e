// The assignment's named model sizes (the spec's "Model under test" table). One list
// for the two sides that speak of them: the transformer_lm plugin resolves its `size`
// option from it, and report captions spell a record's `model.size` out as dimensions
// (runner report reads records without loading plugins, and the host never includes
// a plugin's header).
#pragma once
#include <array>
#include <cstdint>

namespace runner {

struct NamedModelSize {
  const char* name;
  std::int64_t d_model, d_ff, num_layers, num_heads;
};

inline constexpr std::array<NamedModelSize, 5> kModelSizes{{
    {"small", 768, 3072, 12, 12},
    {"medium", 1024, 4096, 24, 16},
    {"large", 1280, 5120, 36, 20},
    {"xl", 1600, 6400, 48, 25},
    {"2.7B", 2560, 10240, 32, 32},
}};

}  // namespace runner
