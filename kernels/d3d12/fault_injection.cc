#include "kernels/d3d12/fault_injection.h"

#include <cstdlib>
#include <string>

namespace dmlserve::d3d12 {

int ResolveFailAfterBatches(int option) {
  if (option >= 0) return option;
  if (option == kFaultInjectionOff) return -1;
  const char* value = std::getenv(kFailAfterBatchesEnv);
  if (value == nullptr || *value == '\0') return -1;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > 1 << 30) return -1;
  return static_cast<int>(parsed);
}

}  // namespace dmlserve::d3d12
