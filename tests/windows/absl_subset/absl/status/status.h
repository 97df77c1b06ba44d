// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STATUS_STATUS_H_
#define DMLSERVE_ABSL_SUBSET_STATUS_STATUS_H_

#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace absl {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// As Abseil prints them: operators read these names in logs.
inline std::string StatusCodeToString(StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  return index >= 0 && index <= 16 ? kNames[index] : "code " + std::to_string(index);
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string_view message)
      : code_(code), message_(code == StatusCode::kOk ? "" : std::string(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  std::string_view message() const { return message_; }
  void IgnoreError() const {}
  std::string ToString() const { return ok() ? "OK" : StatusCodeToString(code_) + ": " + message_; }
  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }
  friend bool operator!=(const Status& a, const Status& b) { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }

#define DMLSERVE_ABSL_SUBSET_ERROR(Name, Code)          \
  inline Status Name##Error(std::string_view message) { \
    return Status(StatusCode::Code, message);           \
  }                                                     \
  inline bool Is##Name(const Status& status) { return status.code() == StatusCode::Code; }
DMLSERVE_ABSL_SUBSET_ERROR(Cancelled, kCancelled)
DMLSERVE_ABSL_SUBSET_ERROR(Unknown, kUnknown)
DMLSERVE_ABSL_SUBSET_ERROR(InvalidArgument, kInvalidArgument)
DMLSERVE_ABSL_SUBSET_ERROR(DeadlineExceeded, kDeadlineExceeded)
DMLSERVE_ABSL_SUBSET_ERROR(NotFound, kNotFound)
DMLSERVE_ABSL_SUBSET_ERROR(AlreadyExists, kAlreadyExists)
DMLSERVE_ABSL_SUBSET_ERROR(PermissionDenied, kPermissionDenied)
DMLSERVE_ABSL_SUBSET_ERROR(ResourceExhausted, kResourceExhausted)
DMLSERVE_ABSL_SUBSET_ERROR(FailedPrecondition, kFailedPrecondition)
DMLSERVE_ABSL_SUBSET_ERROR(Aborted, kAborted)
DMLSERVE_ABSL_SUBSET_ERROR(OutOfRange, kOutOfRange)
DMLSERVE_ABSL_SUBSET_ERROR(Unimplemented, kUnimplemented)
DMLSERVE_ABSL_SUBSET_ERROR(Internal, kInternal)
DMLSERVE_ABSL_SUBSET_ERROR(Unavailable, kUnavailable)
DMLSERVE_ABSL_SUBSET_ERROR(DataLoss, kDataLoss)
DMLSERVE_ABSL_SUBSET_ERROR(Unauthenticated, kUnauthenticated)
#undef DMLSERVE_ABSL_SUBSET_ERROR

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STATUS_STATUS_H_
