#include "kernels/d3d12/buffer_factory.h"

#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {

absl::StatusOr<ComPtr<ID3D12Resource>> BufferFactory::Create(HeapKind kind, uint64_t size_bytes) {
  D3D12_HEAP_PROPERTIES heap = {};
  D3D12_RESOURCE_STATES state = D3D12_RESOURCE_STATE_COMMON;
  D3D12_RESOURCE_FLAGS flags = D3D12_RESOURCE_FLAG_NONE;
  switch (kind) {
    case HeapKind::kDefault:
      heap.Type = D3D12_HEAP_TYPE_DEFAULT;
      flags = D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS;
      break;
    case HeapKind::kUpload:
      heap.Type = D3D12_HEAP_TYPE_UPLOAD;
      state = D3D12_RESOURCE_STATE_GENERIC_READ;
      break;
    case HeapKind::kReadback:
      heap.Type = D3D12_HEAP_TYPE_READBACK;
      state = D3D12_RESOURCE_STATE_COPY_DEST;
      break;
  }
  D3D12_RESOURCE_DESC desc = {};
  desc.Dimension = D3D12_RESOURCE_DIMENSION_BUFFER;
  desc.Width = size_bytes;
  desc.Height = 1;
  desc.DepthOrArraySize = 1;
  desc.MipLevels = 1;
  desc.Format = DXGI_FORMAT_UNKNOWN;
  desc.SampleDesc.Count = 1;
  desc.Layout = D3D12_TEXTURE_LAYOUT_ROW_MAJOR;
  desc.Flags = flags;
  ComPtr<ID3D12Resource> resource;
  HRESULT hr = device_->CreateCommittedResource(&heap, D3D12_HEAP_FLAG_NONE, &desc, state, nullptr,
                                                __uuidof(ID3D12Resource), resource.put_void());
  if (FAILED(hr)) {
    return HResultError(hr, absl::StrCat("CreateCommittedResource(", size_bytes, " bytes)"));
  }
  creations_.fetch_add(1, std::memory_order_relaxed);
  return resource;
}

}  // namespace dmlserve::d3d12
