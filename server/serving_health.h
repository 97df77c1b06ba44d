#ifndef DMLSERVE_SERVER_SERVING_HEALTH_H_
#define DMLSERVE_SERVER_SERVING_HEALTH_H_

// Keeps gRPC's health service (grpc.health.v1) in step with the devices: once
// no device can serve, every Execute would fail UNAVAILABLE, so the server
// reports NOT_SERVING and load balancers and Kubernetes stop sending it work.
// It sits between the scheduler and the next observer (the metrics), to which
// it forwards every event. When a device recovers (the scheduler re-probes
// failed devices) it reports SERVING again.

#include <grpcpp/health_check_service_interface.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/scheduler_observer.h"

namespace dmlserve {

class ServingHealth final : public ForwardingSchedulerObserver {
 public:
  // `next` may be null; it must outlive this.
  explicit ServingHealth(SchedulerObserver* next) : ForwardingSchedulerObserver(next) {}

  // From now on reports to `health` (the running server's; it must outlive
  // this): NOT_SERVING at once when `devices_serving` is 0, and whenever
  // the last device is removed later.
  void Attach(grpc::HealthCheckServiceInterface* health, int devices_serving);
  // Stops reporting: the server drains and has said NOT_SERVING for good.
  void Detach();

  void OnDeviceRemoved(absl::string_view device, int devices_left) override;
  void OnDeviceRecovered(absl::string_view device, int devices_serving) override;

 private:
  absl::Mutex mu_;
  grpc::HealthCheckServiceInterface* health_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool no_device_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_SERVING_HEALTH_H_
