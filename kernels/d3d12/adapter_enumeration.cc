#include "kernels/d3d12/adapter_enumeration.h"

#include "kernels/d3d12/d3d12_api.h"
#include "kernels/d3d12/fence_event.h"
#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {
namespace {

constexpr D3D_FEATURE_LEVEL kFeatureLevel = D3D_FEATURE_LEVEL_11_0;

#ifdef _WIN32

std::string Utf8FromWide(const wchar_t* wide) {
  int bytes = WideCharToMultiByte(CP_UTF8, 0, wide, -1, nullptr, 0, nullptr, nullptr);
  if (bytes <= 1) return std::string();
  std::string utf8(static_cast<size_t>(bytes), '\0');
  WideCharToMultiByte(CP_UTF8, 0, wide, -1, utf8.data(), bytes, nullptr, nullptr);
  utf8.resize(static_cast<size_t>(bytes) - 1);  // the terminating NUL
  return utf8;
}

struct DxgiAdapter {
  AdapterInfo info;
  ComPtr<IDXGIAdapter1> adapter;
};

// DXGI adapters that can run D3D12, in DXGI's order (the primary GPU first,
// WARP last).
absl::StatusOr<std::vector<DxgiAdapter>> ListDxgiAdapters() {
  ComPtr<IDXGIFactory1> factory;
  HRESULT hr = CreateDXGIFactory1(__uuidof(IDXGIFactory1), factory.put_void());
  if (FAILED(hr)) return absl::UnavailableError(HResultError(hr, "CreateDXGIFactory1").message());
  std::vector<DxgiAdapter> adapters;
  for (UINT i = 0;; ++i) {
    ComPtr<IDXGIAdapter1> adapter;
    hr = factory->EnumAdapters1(i, adapter.put());
    if (hr == DXGI_ERROR_NOT_FOUND) break;
    if (FAILED(hr)) return HResultError(hr, "IDXGIFactory1::EnumAdapters1");
    DXGI_ADAPTER_DESC1 desc = {};
    hr = adapter->GetDesc1(&desc);
    if (FAILED(hr)) return HResultError(hr, "IDXGIAdapter1::GetDesc1");
    // A null output pointer asks only whether the adapter can run D3D12.
    if (FAILED(D3D12CreateDevice(adapter.get(), kFeatureLevel, __uuidof(ID3D12Device), nullptr))) {
      continue;
    }
    DxgiAdapter entry;
    entry.info.index = static_cast<int>(adapters.size());
    entry.info.name = Utf8FromWide(desc.Description);
    entry.info.software = (desc.Flags & DXGI_ADAPTER_FLAG_SOFTWARE) != 0;
    entry.info.vendor_id = desc.VendorId;
    entry.info.device_id = desc.DeviceId;
    entry.adapter = std::move(adapter);
    adapters.push_back(std::move(entry));
  }
  return adapters;
}

#else  // Linux: vkd3d

// One vkd3d (Vulkan) instance for the process, created on first use and
// never destroyed: devices keep references to it, and tearing it down at
// exit would race with their destructors.
struct VulkanAdapters {
  absl::Status status;
  vkd3d_instance* instance = nullptr;
  std::vector<VkPhysicalDevice> physical_devices;
  std::vector<AdapterInfo> infos;
};

const VulkanAdapters& GetVulkanAdapters() {
  static const VulkanAdapters* const adapters = [] {
    auto* result = new VulkanAdapters;
    vkd3d_instance_create_info create_info = {};
    create_info.type = VKD3D_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    // vkd3d's fence worker signals fence events through this; FenceEvent's
    // events (vkd3d-utils' cannot be waited on with a timeout).
    create_info.pfn_signal_event = SignalFenceEvent;
    create_info.wchar_size = sizeof(WCHAR);
    // The loader we link against, so that the VkInstance below is one we can
    // query directly.
    create_info.pfn_vkGetInstanceProcAddr = vkGetInstanceProcAddr;
    HRESULT hr = vkd3d_create_instance(&create_info, &result->instance);
    if (FAILED(hr)) {
      result->status = absl::UnavailableError(absl::StrCat(
          "vkd3d_create_instance failed (", HResultToString(hr),
          "): no usable Vulkan loader or driver (install libvulkan1 and mesa-vulkan-drivers "
          "for the software device lavapipe)"));
      return result;
    }
    VkInstance vk_instance = vkd3d_instance_get_vk_instance(result->instance);
    uint32_t count = 0;
    VkResult vr = vkEnumeratePhysicalDevices(vk_instance, &count, nullptr);
    if (vr == VK_SUCCESS && count > 0) {
      result->physical_devices.resize(count);
      vr = vkEnumeratePhysicalDevices(vk_instance, &count, result->physical_devices.data());
      result->physical_devices.resize(count);
    }
    if (vr != VK_SUCCESS && vr != VK_INCOMPLETE) {
      result->status = absl::UnavailableError(
          absl::StrCat("vkEnumeratePhysicalDevices failed: VkResult ", static_cast<int>(vr)));
      result->physical_devices.clear();
      return result;
    }
    for (VkPhysicalDevice physical_device : result->physical_devices) {
      VkPhysicalDeviceProperties properties = {};
      vkGetPhysicalDeviceProperties(physical_device, &properties);
      AdapterInfo info;
      info.index = static_cast<int>(result->infos.size());
      info.name = properties.deviceName;
      info.software = properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
      info.vendor_id = properties.vendorID;
      info.device_id = properties.deviceID;
      result->infos.push_back(std::move(info));
    }
    return result;
  }();
  return *adapters;
}

#endif

}  // namespace

absl::StatusOr<std::vector<AdapterInfo>> EnumerateAdapters() {
#ifdef _WIN32
  absl::StatusOr<std::vector<DxgiAdapter>> adapters = ListDxgiAdapters();
  if (!adapters.ok()) return adapters.status();
  std::vector<AdapterInfo> infos;
  for (const DxgiAdapter& adapter : *adapters) infos.push_back(adapter.info);
  return infos;
#else
  const VulkanAdapters& adapters = GetVulkanAdapters();
  if (!adapters.status.ok()) return adapters.status;
  return adapters.infos;
#endif
}

absl::StatusOr<ComPtr<ID3D12Device>> CreateAdapterDevice(int adapter_index) {
#ifdef _WIN32
  absl::StatusOr<std::vector<DxgiAdapter>> adapters = ListDxgiAdapters();
  if (!adapters.ok()) return adapters.status();
  if (adapter_index < 0 || adapter_index >= static_cast<int>(adapters->size())) {
    return absl::NotFoundError(
        absl::StrCat("no D3D12 adapter ", adapter_index, " (there are ", adapters->size(), ")"));
  }
  ComPtr<ID3D12Device> device;
  HRESULT hr = D3D12CreateDevice((*adapters)[adapter_index].adapter.get(), kFeatureLevel,
                                 __uuidof(ID3D12Device), device.put_void());
  if (FAILED(hr)) return HResultError(hr, "D3D12CreateDevice");
  return device;
#else
  const VulkanAdapters& adapters = GetVulkanAdapters();
  if (!adapters.status.ok()) return adapters.status;
  if (adapter_index < 0 || adapter_index >= static_cast<int>(adapters.infos.size())) {
    return absl::NotFoundError(absl::StrCat("no D3D12 adapter ", adapter_index, " (there are ",
                                            adapters.infos.size(), ")"));
  }
  vkd3d_device_create_info create_info = {};
  create_info.type = VKD3D_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  create_info.minimum_feature_level = kFeatureLevel;
  create_info.instance = adapters.instance;
  create_info.vk_physical_device = adapters.physical_devices[adapter_index];
  ComPtr<ID3D12Device> device;
  HRESULT hr = vkd3d_create_device(&create_info, __uuidof(ID3D12Device), device.put_void());
  if (FAILED(hr)) {
    return HResultError(
        hr, absl::StrCat("vkd3d_create_device on '", adapters.infos[adapter_index].name, "'"));
  }
  return device;
#endif
}

}  // namespace dmlserve::d3d12
