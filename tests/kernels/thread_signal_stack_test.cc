// A thread's own alternate signal stack (kernels/core/thread_signal_stack.h):
// with it, a stack overflow on a thread other than the main one is reported
// by the server's fault handler (Abseil's, as server/platform/crash_report.cc
// installs it); without it the thread dies with nothing said.

#include "kernels/core/thread_signal_stack.h"

#include <csignal>
#include <cstdlib>
#include <thread>

#include "absl/debugging/failure_signal_handler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dmlserve {
namespace {

#ifndef _WIN32

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ThreadSignalStackTest, ANewThreadHasNoneUntilItAsks) {
  bool before = true, after = false, again = false;
  std::thread([&] {
    before = ThreadHasSignalStack();
    EnsureThreadSignalStack();
    after = ThreadHasSignalStack();
    EnsureThreadSignalStack();  // a second call keeps the same stack
    again = ThreadHasSignalStack();
  }).join();
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_FALSE(before);  // (a sanitizer's runtime gives every thread one of its own)
#endif
  EXPECT_TRUE(after);
  EXPECT_TRUE(again);
}

TEST(ThreadSignalStackTest, ManyThreadsComeAndGo) {
  // Each thread's stack is unmapped at its exit: a thousand threads run
  // with no growth a test could see, and none fails to get one.
  for (int i = 0; i < 1000; ++i) {
    bool has = false;
    std::thread([&] {
      EnsureThreadSignalStack();
      has = ThreadHasSignalStack();
    }).join();
    ASSERT_TRUE(has) << "thread " << i;
  }
}

// Sanitizers report a stack overflow themselves, on stacks of their own.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

// Recurses until the thread's stack is gone. `depth` comes from the caller
// at run time, so the compiler can neither end the recursion nor make it a
// loop (the frame's array is used after the call).
int Overflow(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  if (depth < 0) return 0;
  return Overflow(depth + 1) + frame[0];
}

// In the death test's child: the handler as the server installs it, then a
// thread (with or without its own signal stack) that overflows its stack.
void OverflowOnAThread(bool signal_stack) {
  absl::FailureSignalHandlerOptions options;
  options.call_previous_handler = false;
  absl::InstallFailureSignalHandler(options);
  std::thread([signal_stack] {
    if (signal_stack) EnsureThreadSignalStack();
    std::exit(Overflow(std::rand() % 2));
  }).join();
}

TEST(ThreadSignalStackDeathTest, AStackOverflowOnAThreadWithOneIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(OverflowOnAThread(true), ::testing::KilledBySignal(SIGSEGV),
              ::testing::AllOf(HasSubstr("*** SIGSEGV received at time="),
                               // the thread's stack, a frame a line
                               ::testing::ContainsRegex("@ +0x[0-9a-f]+ .*Overflow")));
}

TEST(ThreadSignalStackDeathTest, WithoutOneTheThreadDiesUnreported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(OverflowOnAThread(false), ::testing::KilledBySignal(SIGSEGV),
              Not(HasSubstr("SIGSEGV received")));
}

#endif  // sanitizers

#endif  // _WIN32

}  // namespace
}  // namespace dmlserve
