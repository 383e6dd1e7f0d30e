#include "runner/weight_copies.hpp"

#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include <c10/util/intrusive_ptr.h>

namespace runner {
namespace {

struct Entry {
  c10::weak_intrusive_ptr<c10::TensorImpl> weight, copy;
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<const c10::TensorImpl*, Entry> entries;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_weight_copy(const at::Tensor& weight, const at::Tensor& copy) {
  if (!weight.defined() || !copy.defined() || weight.sizes() != copy.sizes() || weight.device() != copy.device() ||
      (copy.scalar_type() != at::kBFloat16 && copy.scalar_type() != at::kHalf))
    throw std::invalid_argument("register_weight_copy: the copy must be bf16 or fp16 with the weight's shape and device");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  // Drop entries whose weight or copy died (an earlier model's), so the map stays small.
  for (auto it = r.entries.begin(); it != r.entries.end();)
    it = it->second.weight.expired() || it->second.copy.expired() ? r.entries.erase(it) : std::next(it);
  r.entries.insert_or_assign(weight.unsafeGetTensorImpl(),
                             Entry{c10::weak_intrusive_ptr<c10::TensorImpl>(weight.getIntrusivePtr()),
                                   c10::weak_intrusive_ptr<c10::TensorImpl>(copy.getIntrusivePtr())});
}

at::Tensor weight_copy(const at::Tensor& weight) {
  if (!weight.defined()) return {};
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.entries.find(weight.unsafeGetTensorImpl());
  if (it == r.entries.end()) return {};
  // The address may belong to a newer tensor than the one registered.
  if (it->second.weight.lock().get() != weight.unsafeGetTensorImpl()) return {};
  c10::intrusive_ptr<c10::TensorImpl> copy = it->second.copy.lock();
  if (!copy) return {};
  return at::Tensor(std::move(copy));
}

}  // namespace runner
