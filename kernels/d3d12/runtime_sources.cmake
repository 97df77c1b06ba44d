# The D3D12 runtime's sources, relative to this folder. Included by this
# folder's CMakeLists.txt and by the Windows cross-build
# (tests/windows/project), which compiles them with mingw-w64.
set(DMLSERVE_D3D12_RUNTIME_SOURCES
  adapter_enumeration.cc
  buffer_factory.cc
  command_ring.cc
  d3d12_guids.cc
  device_health.cc
  device_runtime.cc
  fault_injection.cc
  fence_event.cc
  gpu_buffer_pool.cc
  hresult.cc
  kernel_library.cc
  pipeline_cache.cc
  plan_executor.cc
  release_when_idle.cc
  resident_tensors.cc
  ring_allocator.cc
  root_signature.cc
  upload_ring.cc)
