#include "server/platform/crash_report.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/platform/log.h"

#ifdef _WIN32
#include <windows.h>
#else
#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#endif

namespace dmlserve {
namespace {

// The exception nothing caught, when std::terminate was called for one.
std::string CurrentExceptionText() {
  const std::exception_ptr current = std::current_exception();
  if (current == nullptr) return "std::terminate was called with no exception";
  try {
    std::rethrow_exception(current);
  } catch (const std::exception& error) {
    return absl::StrCat("an uncaught exception: ", error.what());
  } catch (...) {
    return "an uncaught exception of a type not derived from std::exception";
  }
}

[[noreturn]] void OnTerminate() {
  LogFatal(absl::StrCat("fatal: terminate called: ", CurrentExceptionText()));
  std::abort();
}

#ifdef _WIN32

// The exceptions a native fault raises, by name.
const char* ExceptionName(DWORD code) {
  switch (code) {
    case EXCEPTION_ACCESS_VIOLATION:
      return "access violation";
    case EXCEPTION_ILLEGAL_INSTRUCTION:
      return "illegal instruction";
    case EXCEPTION_PRIV_INSTRUCTION:
      return "privileged instruction";
    case EXCEPTION_INT_DIVIDE_BY_ZERO:
      return "integer division by zero";
    case EXCEPTION_INT_OVERFLOW:
      return "integer overflow";
    case EXCEPTION_STACK_OVERFLOW:
      return "stack overflow";
    case EXCEPTION_IN_PAGE_ERROR:
      return "in-page error (a mapped file could not be read)";
    case EXCEPTION_DATATYPE_MISALIGNMENT:
      return "misaligned data";
    case EXCEPTION_BREAKPOINT:
      return "breakpoint";
    default:
      return "exception";
  }
}

// Formats into fixed buffers (the heap may be what broke) and logs the line.
void Report(const EXCEPTION_RECORD& record, DWORD thread) {
  char access[64] = "";
  if ((record.ExceptionCode == EXCEPTION_ACCESS_VIOLATION ||
       record.ExceptionCode == EXCEPTION_IN_PAGE_ERROR) &&
      record.NumberParameters >= 2) {
    const ULONG_PTR kind = record.ExceptionInformation[0];
    std::snprintf(access, sizeof(access), " %s 0x%016llx",
                  kind == 0   ? "reading"
                  : kind == 1 ? "writing"
                              : "executing",
                  static_cast<unsigned long long>(record.ExceptionInformation[1]));
  }
  // Module and offset rather than an address: images load at random bases.
  char where[MAX_PATH + 32] = "an address in no module";
  HMODULE module = nullptr;
  char path[MAX_PATH];
  if (GetModuleHandleExA(
          GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
          static_cast<LPCSTR>(record.ExceptionAddress), &module) &&
      GetModuleFileNameA(module, path, sizeof(path)) != 0) {
    const char* name = path;
    for (const char* c = path; *c != '\0'; ++c) {
      if (*c == '\\' || *c == '/') name = c + 1;
    }
    std::snprintf(
        where, sizeof(where), "%s+0x%llx", name,
        static_cast<unsigned long long>(static_cast<const char*>(record.ExceptionAddress) -
                                        reinterpret_cast<const char*>(module)));
  } else {
    std::snprintf(where, sizeof(where), "%p", record.ExceptionAddress);
  }
  char line[512];
  std::snprintf(line, sizeof(line), "fatal: unhandled exception 0x%08lX (%s%s) at %s in thread %lu",
                static_cast<unsigned long>(record.ExceptionCode),
                ExceptionName(record.ExceptionCode), access, where,
                static_cast<unsigned long>(thread));
  LogFatal(line);
}

struct FaultToReport {
  const EXCEPTION_RECORD* record;
  DWORD thread;
};

DWORD WINAPI ReportOnAStackOfItsOwn(LPVOID fault) {
  const auto& to_report = *static_cast<const FaultToReport*>(fault);
  Report(*to_report.record, to_report.thread);
  return 0;
}

LONG WINAPI OnUnhandledException(EXCEPTION_POINTERS* exception) {
  const EXCEPTION_RECORD& record = *exception->ExceptionRecord;
  const DWORD thread = GetCurrentThreadId();
  // After a stack overflow this thread has only a guard page's worth of
  // stack left: the report runs on a thread of its own (given 10 s; a
  // loader lock held by the fault would block its start).
  HANDLE reporter = nullptr;
  FaultToReport fault{&record, thread};
  if (record.ExceptionCode == EXCEPTION_STACK_OVERFLOW) {
    reporter = CreateThread(nullptr, 256 * 1024, ReportOnAStackOfItsOwn, &fault, 0, nullptr);
  }
  if (reporter != nullptr) {
    WaitForSingleObject(reporter, 10000);
    CloseHandle(reporter);
  } else {
    Report(record, thread);
  }
  // The process ends here, with the exception code as its exit code: the
  // service manager sees a failure (and restarts the service), and no
  // dialog waits for a user that a server does not have.
  return EXCEPTION_EXECUTE_HANDLER;
}

void InstallFaultReport(const char* /*argv0*/) {
  SetUnhandledExceptionFilter(OnUnhandledException);
  // No "program has stopped working" box and no debugger prompt: a service
  // has no desktop to show them on.
  SetErrorMode(GetErrorMode() | SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX);
}

#else

void InstallFaultReport(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  absl::FailureSignalHandlerOptions options;
  // The report is the last thing the process does: it then dies of the
  // signal (raised again with the default action), as a service manager and
  // a core dump expect.
  options.call_previous_handler = false;
  // Abseil ends a report that takes longer than this with SIGABRT: a
  // symbolized stack on a loaded machine (or a sanitizer build) can take
  // more than its default 3 s.
  options.alarm_on_failure_secs = 20;
  absl::InstallFailureSignalHandler(options);
}

#endif

}  // namespace

void InstallCrashReport(const char* argv0) {
  std::set_terminate(OnTerminate);
  InstallFaultReport(argv0);
}

}  // namespace dmlserve
