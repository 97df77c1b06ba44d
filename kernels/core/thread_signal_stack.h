#ifndef DMLSERVE_KERNELS_CORE_THREAD_SIGNAL_STACK_H_
#define DMLSERVE_KERNELS_CORE_THREAD_SIGNAL_STACK_H_

// An alternate signal stack for the calling thread, so that the server's
// fault report (server/platform/crash_report.h: Abseil's failure signal
// handler, installed with SA_ONSTACK) still runs after a stack overflow on
// that thread. Abseil gives only the thread that installs the handler (the
// main one) such a stack; a thread without one that overflows its stack
// dies of a second SIGSEGV with nothing said.
//
// POSIX only; on Windows a no-op (there the crash report handles a stack
// overflow on any thread by reporting from a thread of its own).

namespace dmlserve {

// Gives the calling thread an alternate signal stack, once: later calls on
// the same thread do nothing. The stack (256 KiB, more in sanitizer builds,
// with a guard page below it) is unmapped when the thread exits. Leaves a
// stack the thread already has (set by someone else) alone. Call it first
// thing in a thread that runs the server's work: the scheduler's workers,
// the kernel thread pool's, and (through Scheduler::Submit) every gRPC
// thread that submits a job. Thread-safe; never fails (a stack it cannot
// map is left out, and the thread runs on without one).
void EnsureThreadSignalStack();

// Whether the calling thread has an alternate signal stack now (tests).
bool ThreadHasSignalStack();

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CORE_THREAD_SIGNAL_STACK_H_
