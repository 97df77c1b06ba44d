#include "bench/d3d12_command_recorder.h"

#include <atomic>
#include <cstring>
#include <utility>

namespace dmlserve::bench {
namespace {

using d3d12::ComPtr;

D3D12_HEAP_TYPE HeapType(ID3D12Resource* resource) {
  D3D12_HEAP_PROPERTIES properties = {};
  D3D12_HEAP_FLAGS flags = D3D12_HEAP_FLAG_NONE;
  // Fails only for reserved resources, which live in no heap of their own.
  if (resource == nullptr || FAILED(resource->GetHeapProperties(&properties, &flags))) {
    return D3D12_HEAP_TYPE_DEFAULT;
  }
  return properties.Type;
}

template <typename Interface>
bool Is(REFIID riid) {
  return std::memcmp(&riid, &__uuidof(Interface), sizeof(IID)) == 0;
}

// ClearState returns HRESULT in vkd3d's headers and void in Microsoft's.
using ClearStateResult = decltype(std::declval<ID3D12GraphicsCommandList&>().ClearState(nullptr));

}  // namespace

// Every method forwards to the real list; Dispatch, the copies,
// ResourceBarrier and the compute root views count first. Reference counted like any COM object
// (the ring holds one reference per context).
class CommandRecorder::Proxy final : public ID3D12GraphicsCommandList {
 public:
  Proxy(ComPtr<ID3D12GraphicsCommandList> list, CommandRecorder* recorder)
      : list_(std::move(list)), recorder_(recorder) {}

  // IUnknown. Interfaces past ID3D12GraphicsCommandList are the real list's:
  // what is recorded through them is not counted (the runtime asks for none).
  HRESULT STDMETHODCALLTYPE QueryInterface(REFIID riid, void** object) override {
    if (Is<IUnknown>(riid) || Is<ID3D12Object>(riid) || Is<ID3D12DeviceChild>(riid) ||
        Is<ID3D12CommandList>(riid) || Is<ID3D12GraphicsCommandList>(riid)) {
      AddRef();
      *object = static_cast<ID3D12GraphicsCommandList*>(this);
      return S_OK;
    }
    return list_->QueryInterface(riid, object);
  }
  ULONG STDMETHODCALLTYPE AddRef() override { return ++references_; }
  ULONG STDMETHODCALLTYPE Release() override {
    const ULONG left = --references_;
    if (left == 0) delete this;
    return left;
  }

  // ID3D12Object, ID3D12DeviceChild, ID3D12CommandList.
  HRESULT STDMETHODCALLTYPE GetPrivateData(REFGUID guid, UINT* size, void* data) override {
    return list_->GetPrivateData(guid, size, data);
  }
  HRESULT STDMETHODCALLTYPE SetPrivateData(REFGUID guid, UINT size, const void* data) override {
    return list_->SetPrivateData(guid, size, data);
  }
  HRESULT STDMETHODCALLTYPE SetPrivateDataInterface(REFGUID guid, const IUnknown* data) override {
    return list_->SetPrivateDataInterface(guid, data);
  }
  HRESULT STDMETHODCALLTYPE SetName(const WCHAR* name) override { return list_->SetName(name); }
  HRESULT STDMETHODCALLTYPE GetDevice(REFIID riid, void** device) override {
    return list_->GetDevice(riid, device);
  }
  D3D12_COMMAND_LIST_TYPE STDMETHODCALLTYPE GetType() override { return list_->GetType(); }

  // ID3D12GraphicsCommandList: what the runtime records.
  void STDMETHODCALLTYPE Dispatch(UINT x, UINT y, UINT z) override {
    recorder_->CountDispatch();
    list_->Dispatch(x, y, z);
  }
  void STDMETHODCALLTYPE CopyBufferRegion(ID3D12Resource* dst, UINT64 dst_offset,
                                          ID3D12Resource* src, UINT64 src_offset,
                                          UINT64 bytes) override {
    recorder_->CountCopy(dst, src, bytes);
    list_->CopyBufferRegion(dst, dst_offset, src, src_offset, bytes);
  }
  void STDMETHODCALLTYPE CopyResource(ID3D12Resource* dst, ID3D12Resource* src) override {
    recorder_->CountCopy(dst, src, dst->GetDesc().Width);  // whole buffers
    list_->CopyResource(dst, src);
  }
  void STDMETHODCALLTYPE ResourceBarrier(UINT count,
                                         const D3D12_RESOURCE_BARRIER* barriers) override {
    recorder_->CountBarriers(count);
    list_->ResourceBarrier(count, barriers);
  }
  void STDMETHODCALLTYPE SetPipelineState(ID3D12PipelineState* state) override {
    list_->SetPipelineState(state);
  }
  // The root signature and root argument setters, compute and graphics:
  // forwarded; only the compute root views (below) are counted.
#define DMLSERVE_FORWARD_ROOT(Suffix, params, args)                \
  void STDMETHODCALLTYPE SetComputeRoot##Suffix params override {  \
    list_->SetComputeRoot##Suffix args;                            \
  }                                                                \
  void STDMETHODCALLTYPE SetGraphicsRoot##Suffix params override { \
    list_->SetGraphicsRoot##Suffix args;                           \
  }
  DMLSERVE_FORWARD_ROOT(Signature, (ID3D12RootSignature * signature), (signature))
  DMLSERVE_FORWARD_ROOT(DescriptorTable, (UINT index, D3D12_GPU_DESCRIPTOR_HANDLE base),
                        (index, base))
  DMLSERVE_FORWARD_ROOT(32BitConstant, (UINT index, UINT data, UINT offset), (index, data, offset))
  DMLSERVE_FORWARD_ROOT(32BitConstants, (UINT index, UINT count, const void* data, UINT offset),
                        (index, count, data, offset))
  DMLSERVE_FORWARD_ROOT(ConstantBufferView, (UINT index, D3D12_GPU_VIRTUAL_ADDRESS address),
                        (index, address))
#undef DMLSERVE_FORWARD_ROOT
  // Root views are counted (see RecordedCommands::root_views).
  void STDMETHODCALLTYPE
  SetComputeRootShaderResourceView(UINT index, D3D12_GPU_VIRTUAL_ADDRESS address) override {
    recorder_->CountRootView();
    list_->SetComputeRootShaderResourceView(index, address);
  }
  void STDMETHODCALLTYPE
  SetComputeRootUnorderedAccessView(UINT index, D3D12_GPU_VIRTUAL_ADDRESS address) override {
    recorder_->CountRootView();
    list_->SetComputeRootUnorderedAccessView(index, address);
  }
  void STDMETHODCALLTYPE
  SetGraphicsRootShaderResourceView(UINT index, D3D12_GPU_VIRTUAL_ADDRESS address) override {
    list_->SetGraphicsRootShaderResourceView(index, address);
  }
  void STDMETHODCALLTYPE
  SetGraphicsRootUnorderedAccessView(UINT index, D3D12_GPU_VIRTUAL_ADDRESS address) override {
    list_->SetGraphicsRootUnorderedAccessView(index, address);
  }
  HRESULT STDMETHODCALLTYPE Close() override { return list_->Close(); }
  HRESULT STDMETHODCALLTYPE Reset(ID3D12CommandAllocator* allocator,
                                  ID3D12PipelineState* state) override {
    return list_->Reset(allocator, state);
  }

  // The rest of the interface (graphics, queries, tiles) is forwarded
  // uncounted; a compute batch has no use for it.
  ClearStateResult STDMETHODCALLTYPE ClearState(ID3D12PipelineState* state) override {
    return list_->ClearState(state);
  }
  void STDMETHODCALLTYPE DrawInstanced(UINT vertices, UINT instances, UINT first_vertex,
                                       UINT first_instance) override {
    list_->DrawInstanced(vertices, instances, first_vertex, first_instance);
  }
  void STDMETHODCALLTYPE DrawIndexedInstanced(UINT indices, UINT instances, UINT first_index,
                                              INT base_vertex, UINT first_instance) override {
    list_->DrawIndexedInstanced(indices, instances, first_index, base_vertex, first_instance);
  }
  void STDMETHODCALLTYPE CopyTextureRegion(const D3D12_TEXTURE_COPY_LOCATION* dst, UINT x, UINT y,
                                           UINT z, const D3D12_TEXTURE_COPY_LOCATION* src,
                                           const D3D12_BOX* box) override {
    recorder_->CountCopy(nullptr, nullptr, 0);
    list_->CopyTextureRegion(dst, x, y, z, src, box);
  }
  void STDMETHODCALLTYPE CopyTiles(ID3D12Resource* tiled,
                                   const D3D12_TILED_RESOURCE_COORDINATE* start,
                                   const D3D12_TILE_REGION_SIZE* size, ID3D12Resource* buffer,
                                   UINT64 offset, D3D12_TILE_COPY_FLAGS flags) override {
    recorder_->CountCopy(nullptr, nullptr, 0);
    list_->CopyTiles(tiled, start, size, buffer, offset, flags);
  }
  void STDMETHODCALLTYPE ResolveSubresource(ID3D12Resource* dst, UINT dst_sub, ID3D12Resource* src,
                                            UINT src_sub, DXGI_FORMAT format) override {
    list_->ResolveSubresource(dst, dst_sub, src, src_sub, format);
  }
  void STDMETHODCALLTYPE IASetPrimitiveTopology(D3D12_PRIMITIVE_TOPOLOGY topology) override {
    list_->IASetPrimitiveTopology(topology);
  }
  void STDMETHODCALLTYPE RSSetViewports(UINT count, const D3D12_VIEWPORT* viewports) override {
    list_->RSSetViewports(count, viewports);
  }
  void STDMETHODCALLTYPE RSSetScissorRects(UINT count, const D3D12_RECT* rects) override {
    list_->RSSetScissorRects(count, rects);
  }
  void STDMETHODCALLTYPE OMSetBlendFactor(const FLOAT factor[4]) override {
    list_->OMSetBlendFactor(factor);
  }
  void STDMETHODCALLTYPE OMSetStencilRef(UINT reference) override {
    list_->OMSetStencilRef(reference);
  }
  void STDMETHODCALLTYPE ExecuteBundle(ID3D12GraphicsCommandList* bundle) override {
    list_->ExecuteBundle(bundle);
  }
  void STDMETHODCALLTYPE SetDescriptorHeaps(UINT count,
                                            ID3D12DescriptorHeap* const* heaps) override {
    list_->SetDescriptorHeaps(count, heaps);
  }
  void STDMETHODCALLTYPE IASetIndexBuffer(const D3D12_INDEX_BUFFER_VIEW* view) override {
    list_->IASetIndexBuffer(view);
  }
  void STDMETHODCALLTYPE IASetVertexBuffers(UINT start, UINT count,
                                            const D3D12_VERTEX_BUFFER_VIEW* views) override {
    list_->IASetVertexBuffers(start, count, views);
  }
  void STDMETHODCALLTYPE SOSetTargets(UINT start, UINT count,
                                      const D3D12_STREAM_OUTPUT_BUFFER_VIEW* views) override {
    list_->SOSetTargets(start, count, views);
  }
  void STDMETHODCALLTYPE OMSetRenderTargets(UINT count, const D3D12_CPU_DESCRIPTOR_HANDLE* targets,
                                            BOOL single_handle,
                                            const D3D12_CPU_DESCRIPTOR_HANDLE* depth) override {
    list_->OMSetRenderTargets(count, targets, single_handle, depth);
  }
  void STDMETHODCALLTYPE ClearDepthStencilView(D3D12_CPU_DESCRIPTOR_HANDLE view,
                                               D3D12_CLEAR_FLAGS flags, FLOAT depth, UINT8 stencil,
                                               UINT count, const D3D12_RECT* rects) override {
    list_->ClearDepthStencilView(view, flags, depth, stencil, count, rects);
  }
  void STDMETHODCALLTYPE ClearRenderTargetView(D3D12_CPU_DESCRIPTOR_HANDLE view,
                                               const FLOAT color[4], UINT count,
                                               const D3D12_RECT* rects) override {
    list_->ClearRenderTargetView(view, color, count, rects);
  }
#define DMLSERVE_FORWARD_CLEAR_UAV(Suffix, Value)                                                 \
  void STDMETHODCALLTYPE ClearUnorderedAccessView##Suffix(                                        \
      D3D12_GPU_DESCRIPTOR_HANDLE gpu, D3D12_CPU_DESCRIPTOR_HANDLE cpu, ID3D12Resource* resource, \
      const Value values[4], UINT count, const D3D12_RECT* rects) override {                      \
    list_->ClearUnorderedAccessView##Suffix(gpu, cpu, resource, values, count, rects);            \
  }
  DMLSERVE_FORWARD_CLEAR_UAV(Uint, UINT)
  DMLSERVE_FORWARD_CLEAR_UAV(Float, FLOAT)
#undef DMLSERVE_FORWARD_CLEAR_UAV
  void STDMETHODCALLTYPE DiscardResource(ID3D12Resource* resource,
                                         const D3D12_DISCARD_REGION* region) override {
    list_->DiscardResource(resource, region);
  }
  void STDMETHODCALLTYPE BeginQuery(ID3D12QueryHeap* heap, D3D12_QUERY_TYPE type,
                                    UINT index) override {
    list_->BeginQuery(heap, type, index);
  }
  void STDMETHODCALLTYPE EndQuery(ID3D12QueryHeap* heap, D3D12_QUERY_TYPE type,
                                  UINT index) override {
    list_->EndQuery(heap, type, index);
  }
  void STDMETHODCALLTYPE ResolveQueryData(ID3D12QueryHeap* heap, D3D12_QUERY_TYPE type, UINT start,
                                          UINT count, ID3D12Resource* dst, UINT64 offset) override {
    list_->ResolveQueryData(heap, type, start, count, dst, offset);
  }
  void STDMETHODCALLTYPE SetPredication(ID3D12Resource* buffer, UINT64 offset,
                                        D3D12_PREDICATION_OP operation) override {
    list_->SetPredication(buffer, offset, operation);
  }
  void STDMETHODCALLTYPE SetMarker(UINT metadata, const void* data, UINT size) override {
    list_->SetMarker(metadata, data, size);
  }
  void STDMETHODCALLTYPE BeginEvent(UINT metadata, const void* data, UINT size) override {
    list_->BeginEvent(metadata, data, size);
  }
  void STDMETHODCALLTYPE EndEvent() override { list_->EndEvent(); }
  void STDMETHODCALLTYPE ExecuteIndirect(ID3D12CommandSignature* signature, UINT max_commands,
                                         ID3D12Resource* arguments, UINT64 arguments_offset,
                                         ID3D12Resource* count, UINT64 count_offset) override {
    recorder_->CountDispatch();
    list_->ExecuteIndirect(signature, max_commands, arguments, arguments_offset, count,
                           count_offset);
  }

 private:
  ~Proxy() = default;

  std::atomic<ULONG> references_{1};
  ComPtr<ID3D12GraphicsCommandList> list_;
  CommandRecorder* recorder_;
};

d3d12::CommandListWrapper CommandRecorder::Wrapper() {
  return [this](ComPtr<ID3D12GraphicsCommandList> list) {
    return ComPtr<ID3D12GraphicsCommandList>::Adopt(new Proxy(std::move(list), this));
  };
}

RecordedCommands CommandRecorder::Take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(counts_, RecordedCommands{});
}

void CommandRecorder::CountCopy(ID3D12Resource* destination, ID3D12Resource* source,
                                uint64_t bytes) {
  // Heap properties first, outside the lock: they are calls into the driver.
  const bool in = HeapType(source) == D3D12_HEAP_TYPE_UPLOAD;
  const bool out = HeapType(destination) == D3D12_HEAP_TYPE_READBACK;
  std::lock_guard<std::mutex> lock(mutex_);
  if (in) {
    ++counts_.copies_in;
    counts_.bytes_in += bytes;
  } else if (out) {
    ++counts_.copies_out;
    counts_.bytes_out += bytes;
  } else {
    ++counts_.copies_on_device;
  }
}

void CommandRecorder::CountBarriers(uint32_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.barrier_calls;
  counts_.barriers += count;
}

void CommandRecorder::CountDispatch() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.dispatches;
}

void CommandRecorder::CountRootView() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.root_views;
}

}  // namespace dmlserve::bench
