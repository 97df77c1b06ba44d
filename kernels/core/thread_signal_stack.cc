#include "kernels/core/thread_signal_stack.h"

#ifndef _WIN32
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#endif

namespace dmlserve {

#ifdef _WIN32

void EnsureThreadSignalStack() {}
bool ThreadHasSignalStack() { return false; }

#else

namespace {

// Room for Abseil's report: the signal's name, then the stack walked and
// symbolized (the symbolizer reads ELF sections on this stack). Sanitizer
// builds need several times more stack for the same frames.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kStackBytes = 5 * 256 * 1024;
#else
constexpr size_t kStackBytes = 256 * 1024;
#endif

class SignalStack {
 public:
  SignalStack() {
    stack_t current{};
    if (sigaltstack(nullptr, &current) != 0) return;
    if ((current.ss_flags & SS_DISABLE) == 0) return;  // someone else's: keep it
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* mapped = mmap(nullptr, page_ + kStackBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return;
    // The lowest page stays inaccessible: a report that outgrows the stack
    // faults there rather than writing over whatever lies below.
    if (mprotect(mapped, page_, PROT_NONE) != 0) {
      munmap(mapped, page_ + kStackBytes);
      return;
    }
    stack_t stack{};
    stack.ss_sp = static_cast<char*>(mapped) + page_;
    stack.ss_size = kStackBytes;
    stack.ss_flags = 0;
    if (sigaltstack(&stack, nullptr) != 0) {
      munmap(mapped, page_ + kStackBytes);
      return;
    }
    mapped_ = mapped;
  }

  ~SignalStack() {
    if (mapped_ == nullptr) return;
    // Off first: the kernel must not deliver a signal onto unmapped memory.
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    if (sigaltstack(&off, nullptr) != 0) return;  // still in use: leave it mapped
    munmap(mapped_, page_ + kStackBytes);
  }

  SignalStack(const SignalStack&) = delete;
  SignalStack& operator=(const SignalStack&) = delete;

 private:
  void* mapped_ = nullptr;
  size_t page_ = 0;
};

}  // namespace

void EnsureThreadSignalStack() {
  // Made on the thread's first call, destroyed when the thread exits.
  thread_local SignalStack stack;
  (void)stack;
}

bool ThreadHasSignalStack() {
  stack_t current{};
  return sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0;
}

#endif

}  // namespace dmlserve
