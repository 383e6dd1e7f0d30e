// Which parameters share a bucket (ddp/bucketed's layout; PyTorch's reducer calls
// its version compute_bucket_assignment_by_size).
//
// Parameters are taken in reverse order, since backward produces the last layers'
// gradients first, so buckets fill (and launch) in the order gradients arrive. A
// bucket holds consecutive parameters up to `bucket_bytes` in all; a parameter larger
// than that gets a bucket of its own, and a change of dtype or device starts a new
// bucket (one flat tensor holds a bucket). The first bucket may have a smaller limit,
// `first_bucket_bytes` (PyTorch's DDP caps it at 1 MiB), so that its all-reduce starts
// early in backward; 0 gives it the same limit as the others. Returns each bucket's
// parameter indices.
#pragma once
#include <cstddef>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ddp_bucketed {

std::vector<std::vector<std::size_t>> bucket_assignment(const std::vector<at::Tensor>& params, double bucket_bytes,
                                                       double first_bucket_bytes = 0);

}  // namespace ddp_bucketed
