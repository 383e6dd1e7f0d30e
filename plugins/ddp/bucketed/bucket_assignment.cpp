#include "bucket_assignment.hpp"

namespace ddp_bucketed {

std::vector<std::vector<std::size_t>> bucket_assignment(const std::vector<at::Tensor>& params, double bucket_bytes,
                                                       double first_bucket_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  double bytes = 0;
  for (std::size_t k = params.size(); k-- > 0;) {
    const at::Tensor& p = params[k];
    const double n = static_cast<double>(p.nbytes());
    const double limit = buckets.size() == 1 && first_bucket_bytes > 0 ? first_bucket_bytes : bucket_bytes;
    const bool fits = !buckets.empty() && bytes + n <= limit &&
                      params[buckets.back().front()].dtype() == p.dtype() &&
                      params[buckets.back().front()].device() == p.device();
    if (!fits) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(k);
    bytes += n;
  }
  return buckets;
}

}  // namespace ddp_bucketed
