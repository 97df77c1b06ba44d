/* service_control.exe NAME paramchange|interrogate: sends a control code to
 * an installed service, as `sc control NAME paramchange` does on Windows
 * (wine's sc.exe has no `control` verb). Used by windows_service_test.py. */
#include <stdio.h>
#include <string.h>
#include <windows.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: service_control NAME paramchange|interrogate\n");
    return 2;
  }
  DWORD code = strcmp(argv[2], "paramchange") == 0 ? SERVICE_CONTROL_PARAMCHANGE
               : strcmp(argv[2], "interrogate") == 0 ? SERVICE_CONTROL_INTERROGATE
                                                      : 0;
  if (code == 0) {
    fprintf(stderr, "unknown control %s\n", argv[2]);
    return 2;
  }
  SC_HANDLE manager = OpenSCManagerA(NULL, NULL, SC_MANAGER_CONNECT);
  SC_HANDLE service = manager ? OpenServiceA(manager, argv[1], SERVICE_PAUSE_CONTINUE |
                                                                   SERVICE_INTERROGATE)
                              : NULL;
  SERVICE_STATUS status;
  if (service == NULL || !ControlService(service, code, &status)) {
    fprintf(stderr, "control %s of %s failed: error %lu\n", argv[2], argv[1], GetLastError());
    return 1;
  }
  printf("%s sent to %s (state %lu)\n", argv[2], argv[1], status.dwCurrentState);
  return 0;
}
