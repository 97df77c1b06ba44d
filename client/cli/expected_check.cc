#include "client/cli/expected_check.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/tensor_codec.h"

namespace dmlserve::client::cli {
namespace {

bool IsFloat(v1::DataType type) {
  return type == v1::FLOAT32 || type == v1::FLOAT16 || type == v1::FLOAT64;
}

}  // namespace

absl::Status CheckAgainstExpected(const v1::Tensor& output, const Json& expected) {
  absl::StatusOr<v1::Tensor> want = TensorFromJson(expected);
  if (!want.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("expected: ", want.status().message()));
  }
  if (output.data_type() != want->data_type()) {
    return absl::AbortedError(absl::StrCat("data_type is ", DataTypeDisplayName(output.data_type()),
                                           ", expected ", DataTypeDisplayName(want->data_type())));
  }
  if (std::vector<uint32_t>(output.sizes().begin(), output.sizes().end()) !=
      std::vector<uint32_t>(want->sizes().begin(), want->sizes().end())) {
    return absl::AbortedError(absl::StrCat("sizes are [", absl::StrJoin(output.sizes(), ","),
                                           "], expected [", absl::StrJoin(want->sizes(), ","),
                                           "]"));
  }
  absl::StatusOr<std::vector<double>> got_values = DecodeTensorAsDouble(output);
  if (!got_values.ok()) return got_values.status();
  absl::StatusOr<std::vector<double>> want_values = DecodeTensorAsDouble(*want);
  if (!want_values.ok()) return want_values.status();
  if (!IsFloat(output.data_type()) && output.data() == want->data()) return absl::OkStatus();
  for (size_t i = 0; i < got_values->size(); ++i) {
    const double got = (*got_values)[i];
    const double wanted = (*want_values)[i];
    bool same;
    if (IsFloat(output.data_type())) {
      same = (std::isnan(got) && std::isnan(wanted)) || got == wanted ||
             std::fabs(got - wanted) <= 1e-5 * std::fmax(1.0, std::fabs(wanted));
    } else {
      same = got == wanted;
    }
    if (!same) {
      return absl::AbortedError(absl::StrCat("values[", i, "] is ", got, ", expected ", wanted));
    }
  }
  if (!IsFloat(output.data_type()) && output.data() != want->data()) {
    // Only 64-bit integers beyond 2^53 can differ without a visible double.
    return absl::AbortedError("64-bit integer values differ from the expected ones");
  }
  return absl::OkStatus();
}

}  // namespace dmlserve::client::cli
