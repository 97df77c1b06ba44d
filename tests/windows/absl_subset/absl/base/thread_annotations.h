// Windows cross-build stand-in for Abseil (see ../../README.md).
//
// Clang's thread-safety analysis attributes; mingw-w64 GCC has no such
// analysis (Abseil's own header expands them to nothing there too), and the
// Linux Clang builds check them, so here they are empty.
#ifndef DMLSERVE_ABSL_SUBSET_BASE_THREAD_ANNOTATIONS_H_
#define DMLSERVE_ABSL_SUBSET_BASE_THREAD_ANNOTATIONS_H_

#define ABSL_GUARDED_BY(...)
#define ABSL_PT_GUARDED_BY(...)
#define ABSL_ACQUIRED_AFTER(...)
#define ABSL_ACQUIRED_BEFORE(...)
#define ABSL_EXCLUSIVE_LOCKS_REQUIRED(...)
#define ABSL_SHARED_LOCKS_REQUIRED(...)
#define ABSL_LOCKS_EXCLUDED(...)
#define ABSL_LOCK_RETURNED(...)
#define ABSL_LOCKABLE
#define ABSL_SCOPED_LOCKABLE
#define ABSL_EXCLUSIVE_LOCK_FUNCTION(...)
#define ABSL_SHARED_LOCK_FUNCTION(...)
#define ABSL_UNLOCK_FUNCTION(...)
#define ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(...)
#define ABSL_SHARED_TRYLOCK_FUNCTION(...)
#define ABSL_ASSERT_EXCLUSIVE_LOCK(...)
#define ABSL_ASSERT_SHARED_LOCK(...)
#define ABSL_NO_THREAD_SAFETY_ANALYSIS

#endif  // DMLSERVE_ABSL_SUBSET_BASE_THREAD_ANNOTATIONS_H_
