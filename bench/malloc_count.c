// An LD_PRELOAD library for bench/request_path_counts.sh: counts the heap
// allocations of a process (malloc, calloc, realloc; operator new goes
// through malloc) and writes the count so far to $MALLOC_COUNT_FILE on
// SIGUSR2. Counting, not timing: the figure is the same on a busy machine.
// glibc only (it forwards to __libc_malloc and friends). Aligned allocations
// (posix_memalign, aligned_alloc, over-aligned operator new: the buffer pool's
// blocks, kernels/core/buffer_pool.cc) are not counted; a tiny scan runs in
// place and takes no block.
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void* __libc_malloc(size_t size);
extern void* __libc_calloc(size_t count, size_t size);
extern void* __libc_realloc(void* pointer, size_t size);

static atomic_ulong allocations;
static char path[512];

void* malloc(size_t size) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  return __libc_malloc(size);
}

void* calloc(size_t count, size_t size) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  return __libc_calloc(count, size);
}

void* realloc(void* pointer, size_t size) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  return __libc_realloc(pointer, size);
}

// Runs in a signal handler: open, write and close are async-signal-safe;
// snprintf of an integer into a stack buffer is not formally, but takes no
// lock in glibc.
static void WriteCount(int signal_number) {
  (void)signal_number;
  char line[32];
  const int length =
      snprintf(line, sizeof line, "%lu\n",
               (unsigned long)atomic_load_explicit(&allocations, memory_order_relaxed));
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  if (write(fd, line, (size_t)length) < 0) {
    // Nothing to do: the reader sees a missing or stale count.
  }
  close(fd);
}

__attribute__((constructor)) static void Install(void) {
  const char* file = getenv("MALLOC_COUNT_FILE");
  if (file == NULL) return;
  snprintf(path, sizeof path, "%s", file);
  signal(SIGUSR2, WriteCount);
}
