#ifndef DMLSERVE_SERVER_TENSOR_REPOSITORY_H_
#define DMLSERVE_SERVER_TENSOR_REPOSITORY_H_

// --tensor_repository=DIR: named tensors an operator ships with the server
// (model weights), served under their names like registered tensors but
// read-only, so that every replica started from the same directory serves the
// same weights (docs/tensor_repository.md).
//
// DIR/manifest.json lists them:
//
//   {"tensors": [
//     {"id": "encoder-b", "file": "encoder_b.npy"},
//     {"id": "encoder-b-scale", "file": "scale.bin", "data_type": "FLOAT32",
//      "sizes": [1, 1, 1, 768]}
//   ]}
//
// A file ending in .npy is a NumPy array (format 1.0 to 3.0, C order,
// little-endian or single-byte types: |u1 |i1 <u2 <i2 <u4 <i4 <u8 <i8 <f2 <f4
// <f8); its header gives the type and shape, and data_type/sizes, if given,
// must agree. Any other file is raw row-major little-endian elements, and
// data_type and sizes are required. Files are paths relative to DIR and may
// not leave it. Every tensor is validated like a RegisterTensor request.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

struct RepositoryTensor {
  std::string id;
  Tensor tensor;
};

// Reads and validates every tensor DIR/manifest.json names. Errors name the
// manifest entry and file: "manifest.json: tensors[1] (\"b\"): b.npy: ...".
// No tensor may exceed `max_tensor_bytes`; ids follow RegisterTensor's rules.
absl::StatusOr<std::vector<RepositoryTensor>> LoadTensorRepository(const std::string& directory,
                                                                   uint64_t max_tensor_bytes);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_TENSOR_REPOSITORY_H_
