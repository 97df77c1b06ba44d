#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_DERIVED_FORM_CACHE_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_DERIVED_FORM_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"

namespace dmlserve::d3d12 {

// Host copies of derived forms of registered tensors (packed weights, column
// parameters). A form is made only when a device must upload it (kResident);
// the cache spares making it again for another device (GPU) or after the
// device evicted it. Entries hold the tensors they come from too, so that
// their addresses cannot be reused by other tensors while cached.
// Thread-safe; one per process (Get).
class DerivedFormCache {
 public:
  using Sources = std::vector<std::shared_ptr<Buffer>>;

  static DerivedFormCache& Get();

  // The cached form of `key` from `sources`, else make()'s (null when make
  // fails), cached when it fits `limit` bytes (the form and its sources).
  // Two devices missing at once may both make it; the cache keeps one.
  std::shared_ptr<const Buffer> FindOrMake(
      const std::string& key, const Sources& sources, uint64_t limit,
      const std::function<std::shared_ptr<const Buffer>()>& make);

 private:
  std::shared_ptr<const Buffer> Find(const std::string& key, const Sources& sources);
  void Put(const std::string& key, Sources sources, std::shared_ptr<const Buffer> form,
           uint64_t limit);

  struct Entry {
    std::string key;
    Sources sources;
    std::shared_ptr<const Buffer> form;
    uint64_t size;
  };
  std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  uint64_t total_ = 0;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_DERIVED_FORM_CACHE_H_
