#ifndef DMLSERVE_SERVER_PLATFORM_WAKE_LISTENER_H_
#define DMLSERVE_SERVER_PLATFORM_WAKE_LISTENER_H_

// Opens a TCP connection to a listening socket and hangs up at once, so that
// a thread blocked accepting on it wakes now rather than at its next poll
// timeout (the metrics endpoint's shutdown, metrics_endpoint.h). Best effort:
// failures are ignored, the listener then wakes on its own.

#include "absl/strings/string_view.h"

namespace dmlserve {

// `host` as a listener is given it: empty or "0.0.0.0" (any IPv4 address:
// 127.0.0.1 is used), an IPv4 address, or a bracketed IPv6 one ("[::]" for
// any: ::1 is used).
void WakeListener(absl::string_view host, int port);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_WAKE_LISTENER_H_
