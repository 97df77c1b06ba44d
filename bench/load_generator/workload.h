#ifndef DMLSERVE_BENCH_LOAD_GENERATOR_WORKLOAD_H_
#define DMLSERVE_BENCH_LOAD_GENERATOR_WORKLOAD_H_

// The requests the load generator sends: a small pool per operator, built once
// with random contents, each with what a correct answer must be so that any
// response can be checked.

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dmlserve/v1/dmlserve.pb.h"

namespace dmlserve::load {

enum class OperatorChoice { kCumsum, kCumprod, kQMatMul };

const char* OperatorChoiceName(OperatorChoice choice);

struct WorkloadOptions {
  // Relative weights of the three operators; zero leaves one out.
  int cumsum_weight = 1;
  int cumprod_weight = 1;
  int qmatmul_weight = 1;
  // Scans: uint32 (wrapping) by default, the one type both scans accept and
  // that can be checked exactly. INT32 (cumsum only) is checked exactly too,
  // FLOAT32 within a relative tolerance; other types are sent unchecked.
  std::vector<uint32_t> scan_sizes = {64, 1024};
  uint32_t scan_axis = 1;
  v1::DataType scan_type = v1::UINT32;
  // Each pooled scan gets a random direction and exclusivity; this splits the
  // traffic into batches that cannot be merged.
  bool mixed_scan_attributes = false;
  // Matrix multiplies {m,k} x {k,n}: A int8, B uint8 (per-column scales),
  // output int8. All requests share one B, so the server can fuse them.
  uint32_t m = 4;
  uint32_t k = 256;
  uint32_t n = 256;
  // Refer to B by this id, and to its per-column scales by this id plus
  // "-scale" (both registered by the caller, see Workload::Registrations),
  // instead of sending them: what a client serving one model does.
  std::string registered_b_id;
  int pool_size = 16;  // distinct requests per operator
  uint64_t seed = 1;
};

// A request and how to judge the answer to it.
struct PooledRequest {
  OperatorChoice op;
  v1::ExecuteRequest request;
  // Element-wise expectations, as doubles (uint32 and int8 are exact in a
  // double); empty when this request's answer is not checked.
  std::vector<double> expected;
  // Largest accepted |output - expected|: 0 for integer scans, 1 for the
  // requantized matrix multiply (rounding at near-ties), relative for floats.
  double tolerance = 0;
  bool relative_tolerance = false;
  // For an INT8 output: `expected` as the output's own bytes, compared byte
  // by byte (every response is checked with --verify_every=1, on the cores
  // the server runs on, so the check must cost next to nothing).
  std::string expected_int8;
};

class Workload {
 public:
  static absl::StatusOr<Workload> Create(const WorkloadOptions& options);

  // Every pooled request.
  std::vector<const PooledRequest*> All() const;

  // A random request following the operator weights.
  const PooledRequest& Pick(std::mt19937_64& rng) const;

  // OK when `output` is the answer `request` expects (or it has none).
  static absl::Status Check(const PooledRequest& request, const v1::Tensor& output);

  // What to register before sending (id and tensor): B and its scales when
  // WorkloadOptions::registered_b_id is set, else nothing.
  const std::vector<std::pair<std::string, v1::Tensor>>& Registrations() const {
    return registrations_;
  }

 private:
  Workload() = default;

  // Indexed by OperatorChoice.
  std::vector<PooledRequest> pools_[3];
  int weights_[3] = {0, 0, 0};
  std::vector<std::pair<std::string, v1::Tensor>> registrations_;
};

}  // namespace dmlserve::load

#endif  // DMLSERVE_BENCH_LOAD_GENERATOR_WORKLOAD_H_
