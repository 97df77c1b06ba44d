#ifndef DMLSERVE_KERNELS_BACKEND_DEVICE_H_
#define DMLSERVE_KERNELS_BACKEND_DEVICE_H_

// The seam between the scheduler and the kernels: a Device runs batches.
//
// A new backend implements Device (and a factory that enumerates its
// devices); the scheduler needs nothing else. See docs/architecture.md.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

struct DeviceDescription {
  std::string name;         // unique in the process: "cpu:0", "d3d12:1"
  std::string backend;      // "cpu" or "d3d12"
  std::string description;  // adapter or CPU description
  bool software = false;    // software rasterizer (lavapipe, WARP)
};

// Lets a device give up on work whose result nobody wants any more. Polled
// between blocks of long work (a chunk of rows, a slice of B; never per
// element): OK while the result is still wanted, else the status to report
// (CANCELLED, DEADLINE_EXCEEDED). Must be cheap and thread-safe.
class WorkStopCheck {
 public:
  virtual ~WorkStopCheck() = default;
  virtual absl::Status Check() const = 0;
};

// One operation of a batch and where its result goes.
struct WorkItem {
  const Operation* operation = nullptr;
  Tensor output;        // set by the device on success
  absl::Status status;  // per-item failure (the others still succeed)
  // Optional: when it turns non-OK, a device may stop computing this item
  // and report that status for it instead.
  const WorkStopCheck* stop = nullptr;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual const DeviceDescription& description() const = 0;

  // Whether this device runs `kind` at all. A backend may serve a subset of
  // the operators: the scheduler hands it only batches of operators it
  // supports, and refuses (UNIMPLEMENTED) a job whose operator no device
  // supports. Fixed for the device's lifetime (asked once, when the
  // scheduler starts, and then as batches are placed). The default: every
  // operator.
  virtual bool Supports(OperatorKind kind) const { return true; }

  // Runs a batch of compatible operations of an operator it Supports (they
  // share one scheduler compatibility key: same operator, data types and
  // attributes, and for matrix multiplies the same B tensor, scales and zero
  // points) as one unit of device work, filling each item's output or status.
  //
  // A non-OK return means the device itself failed (removed, hung, submission
  // rejected): no item's output is valid and the caller re-runs them elsewhere
  // and stops using this device.
  //
  // A device may write an item's output into an input's storage when the
  // operation holds the only reference to it (the CPU device scans in place);
  // a caller that reads the inputs afterwards keeps a reference of its own.
  //
  // Called from up to max_inflight_batches() threads at once.
  virtual absl::Status Execute(absl::Span<WorkItem> items) = 0;

  // Whether `operation`, alone, costs less to run on the thread that submits
  // it (a gRPC thread) than to hand to a device thread: a few microseconds of
  // work on a device that computes on the calling thread. Asked only when this
  // device is idle and nothing waits; then Execute runs there. A device that
  // blocks (waits on a GPU fence) must say false.
  virtual bool MayRunOnCallerThread(const Operation& operation) const { return false; }

  // How many jobs like `operation` a batch should hold before running it
  // pays off, when most of a lone job's cost is shared by a whole batch (a
  // matrix multiply streaming a large registered B for one row). 0 or 1:
  // running alone costs little more per job than running in a batch. Under
  // sustained load the scheduler lets such a job, arriving at an idle device,
  // wait a moment (at most max_queue_delay) for that much company instead of
  // running alone (see BatchQueue).
  virtual int PreferredCompany(const Operation& operation) const { return 0; }

  // How many batches may be executing at once (overlapping uploads of one with
  // computation of another).
  virtual int max_inflight_batches() const { return 1; }

  // Tries to make a device that failed (Execute returned non-OK) usable
  // again: for D3D12, a new device on the same adapter, checked with a
  // known-answer batch. OK means it can serve again. The scheduler calls it
  // once none of the device's batches is running any more, every
  // SchedulerOptions::reprobe_interval until it succeeds, from one of the
  // device's worker threads. The default cannot recover.
  virtual absl::Status Recover() {
    return absl::UnimplementedError("this device cannot recover from a failure");
  }

  // Whether some form of the registered tensor `registered_id` is already
  // resident, so a batch that reads it likely avoids an upload here (a hint
  // for placement: the batch may need another form, e.g. a scale's column
  // parameters paired with a different zero point).
  virtual bool IsResident(absl::string_view registered_id) const { return false; }

  // The registered tensor was released; drop any resident copy.
  virtual void Evict(absl::string_view registered_id) {}

  // An upper bound on the memory running `operation` alone takes beyond its
  // operands and output (padding, packing, staging, read-back), for
  // admission: the server counts it in its memory budget
  // (--max_inflight_bytes) with the request's own bytes. Thread-safe.
  virtual uint64_t WorkingBytes(const Operation& operation) const { return 0; }

  // Device memory held (buffers, pools, resident tensors), for metrics.
  virtual uint64_t memory_bytes() const { return 0; }
  // The part of memory_bytes() that holds registered tensors' resident
  // copies (uploaded or packed weights), for metrics.
  virtual uint64_t resident_bytes() const { return 0; }
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_BACKEND_DEVICE_H_
