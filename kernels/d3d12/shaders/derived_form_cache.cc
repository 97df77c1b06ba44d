#include "kernels/d3d12/shaders/derived_form_cache.h"

#include <utility>

namespace dmlserve::d3d12 {

DerivedFormCache& DerivedFormCache::Get() {
  static DerivedFormCache* cache = new DerivedFormCache();
  return *cache;
}

std::shared_ptr<const Buffer> DerivedFormCache::FindOrMake(
    const std::string& key, const Sources& sources, uint64_t limit,
    const std::function<std::shared_ptr<const Buffer>()>& make) {
  std::shared_ptr<const Buffer> form = Find(key, sources);
  if (form == nullptr) {
    form = make();
    if (form != nullptr) Put(key, sources, form, limit);
  }
  return form;
}

std::shared_ptr<const Buffer> DerivedFormCache::Find(const std::string& key,
                                                     const Sources& sources) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key == key && it->sources == sources) {
      entries_.splice(entries_.begin(), entries_, it);
      return it->form;
    }
  }
  return nullptr;
}

void DerivedFormCache::Put(const std::string& key, Sources sources,
                           std::shared_ptr<const Buffer> form, uint64_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& entry : entries_) {
    if (entry.key == key && entry.sources == sources) return;  // made twice at once
  }
  uint64_t size = form->size();
  for (const std::shared_ptr<Buffer>& source : sources) size += source->size();
  if (size > limit) return;
  entries_.push_front({key, std::move(sources), std::move(form), size});
  total_ += size;
  while (total_ > limit) {
    total_ -= entries_.back().size;
    entries_.pop_back();
  }
}

}  // namespace dmlserve::d3d12
