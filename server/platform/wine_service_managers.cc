#include "server/platform/wine_service_managers.h"

#include <tlhelp32.h>

#include <cwctype>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dmlserve {
namespace {

// Connections to try before deciding no manager runs a service: two
// managers alternate, so a few are plenty.
constexpr int kConnections = 6;

struct ProcessEntry {
  DWORD parent = 0;
  std::wstring name;
};

absl::flat_hash_map<DWORD, ProcessEntry> Processes() {
  absl::flat_hash_map<DWORD, ProcessEntry> processes;
  HANDLE snapshot = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  if (snapshot == INVALID_HANDLE_VALUE) return processes;
  PROCESSENTRY32W entry{};
  entry.dwSize = sizeof(entry);
  for (BOOL more = Process32FirstW(snapshot, &entry); more;
       more = Process32NextW(snapshot, &entry)) {
    std::wstring name = entry.szExeFile;
    for (wchar_t& c : name) c = static_cast<wchar_t>(std::towlower(c));
    processes[entry.th32ProcessID] = {entry.th32ParentProcessID, std::move(name)};
  }
  CloseHandle(snapshot);
  return processes;
}

// The process of some RUNNING service, as the manager reached by a fresh
// connection sees it; 0 when that manager runs none.
DWORD RunningServiceProcess() {
  SC_HANDLE manager = OpenSCManagerW(nullptr, nullptr, SC_MANAGER_ENUMERATE_SERVICE);
  if (manager == nullptr) return 0;
  std::vector<BYTE> buffer(64 * 1024);
  DWORD needed = 0, count = 0, resume = 0, found = 0;
  if (EnumServicesStatusExW(manager, SC_ENUM_PROCESS_INFO, SERVICE_WIN32, SERVICE_ACTIVE,
                            buffer.data(), static_cast<DWORD>(buffer.size()), &needed, &count,
                            &resume, nullptr) ||
      GetLastError() == ERROR_MORE_DATA) {
    const auto* services = reinterpret_cast<const ENUM_SERVICE_STATUS_PROCESSW*>(buffer.data());
    for (DWORD i = 0; i < count && found == 0; ++i) {
      const SERVICE_STATUS_PROCESS& status = services[i].ServiceStatusProcess;
      if (status.dwCurrentState == SERVICE_RUNNING) found = status.dwProcessId;
    }
  }
  // Closed before the next connection: wine's RPC reuses an idle connection
  // it still holds, and the next must be new to reach the other manager.
  CloseServiceHandle(manager);
  return found;
}

bool Terminate(DWORD pid) {
  HANDLE process = OpenProcess(PROCESS_TERMINATE | SYNCHRONIZE, FALSE, pid);
  if (process == nullptr) return false;
  const bool terminated = TerminateProcess(process, 1) != 0;
  if (terminated) WaitForSingleObject(process, 5000);
  CloseHandle(process);
  return terminated;
}

std::string StopDuplicates() {
  absl::flat_hash_map<DWORD, ProcessEntry> processes = Processes();
  std::vector<DWORD> managers;
  for (const auto& [pid, entry] : processes) {
    if (entry.name == L"services.exe") managers.push_back(pid);
  }
  if (managers.size() < 2) return "";
  DWORD working = 0;
  for (int i = 0; i < kConnections && working == 0; ++i) {
    const DWORD service = RunningServiceProcess();
    auto it = processes.find(service);
    if (service != 0 && it != processes.end()) {
      auto parent = processes.find(it->second.parent);
      if (parent != processes.end() && parent->second.name == L"services.exe") {
        working = it->second.parent;
      }
    }
  }
  if (working == 0) return "";
  std::vector<std::string> stopped;
  for (DWORD manager : managers) {
    if (manager == working) continue;
    // Its services first (they hang on a manager that is going away), then
    // the manager itself.
    for (const auto& [pid, entry] : processes) {
      if (entry.parent == manager) Terminate(pid);
    }
    if (Terminate(manager)) stopped.push_back(absl::StrCat(manager));
  }
  if (stopped.empty()) return "";
  return absl::StrCat(
      "wine runs ", managers.size(),
      " services.exe in this prefix (made by `wineboot -i`); only one can run services, so the "
      "others were stopped (pid ",
      absl::StrJoin(stopped, ", "), "): see docs/windows.md, \"Under wine\"");
}

}  // namespace

bool RunningUnderWine() {
  const HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
  return ntdll != nullptr && GetProcAddress(ntdll, "wine_get_version") != nullptr;
}

std::string StopDuplicateWineServiceManagers() {
  static std::once_flag once;
  static std::string* report = new std::string;
  std::call_once(once, [] {
    if (RunningUnderWine()) *report = StopDuplicates();
  });
  return *report;
}

}  // namespace dmlserve
