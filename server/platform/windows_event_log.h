#ifndef DMLSERVE_SERVER_PLATFORM_WINDOWS_EVENT_LOG_H_
#define DMLSERVE_SERVER_PLATFORM_WINDOWS_EVENT_LOG_H_

// The Windows event log as the server log's sink (log.h) when it runs as a
// service, which has no console: start-up failures, devices removed and
// recovered, stop requests and the final stop appear in Event Viewer under
// Windows Logs > Application, source "dmlserve".
//
// A source is registered once, by `dmlserve service install`
// (HKLM\SYSTEM\CurrentControlSet\Services\EventLog\Application\<source>),
// naming the executable as its message file: dmlserve_events.mc, compiled
// into it, gives event 1 (information), 2 (warning) and 3 (error), each
// showing the logged line as it is.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/platform/log.h"

namespace dmlserve {

// Writes the source's registry key; `message_file` is the full path of the
// executable that carries the message table. Needs administrator rights.
absl::Status RegisterEventLogSource(absl::string_view source, absl::string_view message_file);
// Deletes that key; OK when it does not exist.
absl::Status UnregisterEventLogSource(absl::string_view source);

// From now on every log line also goes to the event log under `source`
// (informational, warning or error, like its severity). An unregistered
// source still logs; Event Viewer then shows the text as an insert.
absl::Status LogToEventLog(absl::string_view source);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_WINDOWS_EVENT_LOG_H_
