/* fault_in_process.exe IMAGE: makes a running process (the first whose
 * image name is IMAGE) fault as a bug in it would, so that its crash report
 * (server/platform/crash_report.h) can be checked: a thread started in it
 * runs GetSystemTime with a pointer to address 0x10, which is never mapped,
 * and the write there raises an access violation inside a system DLL that
 * nothing handles. (kernel32 is mapped at the same address in every
 * process, so its address here is the same there.) Used by
 * windows_service_test.py. */
#include <stdio.h>
#include <string.h>
#include <windows.h>

/* After windows.h, whose types it uses. */
#include <tlhelp32.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fault_in_process IMAGE\n");
    return 2;
  }
  HANDLE snapshot = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  PROCESSENTRY32 entry;
  entry.dwSize = sizeof(entry);
  DWORD pid = 0;
  for (BOOL more = Process32First(snapshot, &entry); more && pid == 0;
       more = Process32Next(snapshot, &entry)) {
    if (_stricmp(entry.szExeFile, argv[1]) == 0) pid = entry.th32ProcessID;
  }
  CloseHandle(snapshot);
  if (pid == 0) {
    fprintf(stderr, "no process %s\n", argv[1]);
    return 1;
  }
  HANDLE process = OpenProcess(PROCESS_CREATE_THREAD | PROCESS_QUERY_INFORMATION |
                                   PROCESS_VM_OPERATION | PROCESS_VM_WRITE | PROCESS_VM_READ,
                               FALSE, pid);
  LPTHREAD_START_ROUTINE start = (LPTHREAD_START_ROUTINE)(void*)GetProcAddress(
      GetModuleHandleA("kernel32.dll"), "GetSystemTime");
  HANDLE thread = process && start ? CreateRemoteThread(process, NULL, 0, start,
                                                        (LPVOID)(ULONG_PTR)0x10, 0, NULL)
                                   : NULL;
  if (thread == NULL) {
    fprintf(stderr, "could not start a thread in %s (pid %lu): error %lu\n", argv[1], pid,
            GetLastError());
    return 1;
  }
  printf("a faulting thread started in %s (pid %lu)\n", argv[1], pid);
  return 0;
}
