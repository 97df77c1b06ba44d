#ifndef DMLSERVE_SERVER_PLATFORM_CRASH_REPORT_H_
#define DMLSERVE_SERVER_PLATFORM_CRASH_REPORT_H_

// What the server leaves behind when it dies of a fault: the reason, in the
// operational log (log.h: stderr, which journald, Kubernetes and a console
// collect, and a Windows service's event log), not only an exit status. The
// service manager restarts it (systemd's Restart=on-failure, the Windows
// service's recovery actions, docs/windows.md).

namespace dmlserve {

// InstallCrashReport: once, first thing in main, before any thread starts.
//  - POSIX: a fault signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT,
//    SIGTRAP) prints Abseil's failure report ("*** SIGSEGV received at
//    time=... ***" and the receiving thread's stack, symbolized), then the
//    signal is raised again, so the process dies of it (exit status 128 +
//    the signal). SIGTERM's handler is installed too, but a server that
//    serves blocks SIGTERM in every thread (console_control.h), so a stop
//    signal is still a stop. A stack overflow is reported on the main thread
//    (Abseil's alternate signal stack) and on every thread that runs the
//    server's work: the scheduler's and kernel pool's workers and each gRPC
//    thread that submits a job give themselves one
//    (kernels/core/thread_signal_stack.h). Not reported: an overflow on any
//    other thread (gRPC's own before it ever submits), and a report that
//    takes over 20 s ends with SIGABRT.
//  - Windows: an exception no handler takes (an access violation, an
//    illegal instruction: a kernel of an ISA the CPU lacks, ...), in any
//    thread, logs one line, for example
//      fatal: unhandled exception 0xC0000005 (access violation reading
//      0x0000000000000010) at dmlserve.exe+0x1a2b3c in thread 1234
//    (`addr2line -e` on an unstripped build of the same commit finds the
//    offset's source line; after a stack overflow the line is made on a
//    thread of its own) and ends the process with the exception code as its
//    exit code. Windows Error Reporting does not run: no dialog waits, and no
//    LocalDumps dump is written (for a dump, run it under `procdump -e`).
//    The line reaches the event log unless another thread holds the log for
//    over half a second (then stderr only).
//  - Both: std::terminate (an exception nothing caught) logs "fatal:
//    terminate called" with the exception's what() when there is one, then
//    aborts.
void InstallCrashReport(const char* argv0);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_CRASH_REPORT_H_
