#ifndef DMLSERVE_KERNELS_D3D12_COM_PTR_H_
#define DMLSERVE_KERNELS_D3D12_COM_PTR_H_

// An owning reference to a COM object (AddRef/Release), because WRL's
// ComPtr exists only in the Windows SDK and vkd3d has no equivalent.

#include <utility>

namespace dmlserve::d3d12 {

template <typename T>
class ComPtr {
 public:
  ComPtr() = default;
  ComPtr(std::nullptr_t) {}
  // Adopts a reference the caller already owns (what Create* calls return).
  static ComPtr Adopt(T* raw) {
    ComPtr p;
    p.ptr_ = raw;
    return p;
  }
  ComPtr(const ComPtr& other) : ptr_(other.ptr_) {
    if (ptr_ != nullptr) ptr_->AddRef();
  }
  ComPtr(ComPtr&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  ComPtr& operator=(ComPtr other) noexcept {
    std::swap(ptr_, other.ptr_);
    return *this;
  }
  ~ComPtr() { Reset(); }

  void Reset() {
    if (ptr_ != nullptr) std::exchange(ptr_, nullptr)->Release();
  }
  T* get() const { return ptr_; }
  T* operator->() const { return ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }

  // For Create*(..., __uuidof(T), out.put_void()): releases the current
  // object and exposes the slot for the callee to fill.
  void** put_void() {
    Reset();
    return reinterpret_cast<void**>(&ptr_);
  }
  T** put() {
    Reset();
    return &ptr_;
  }

 private:
  T* ptr_ = nullptr;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_COM_PTR_H_
