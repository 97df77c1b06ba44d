#ifndef DMLSERVE_SERVER_PLATFORM_WINE_SERVICE_MANAGERS_H_
#define DMLSERVE_SERVER_PLATFORM_WINE_SERVICE_MANAGERS_H_

// A wine quirk that breaks services, and what `dmlserve service ...` does
// about it (docs/windows.md, "Under wine").
//
// Wine 8 (Debian 12) boots a prefix that does not exist yet before running
// the command asked for; when that command is `wineboot -i`, the prefix is
// booted twice and two services.exe run. Each has its own service database,
// and successive connections to the Service Control Manager's pipe alternate
// between them, so `service install` lands in one and `service start`, one
// process later, asks the other ("does not exist", 1060). Worse, only the
// first can run services: the second's boot-time services hang in
// START_PENDING (its StartService answers "database locked", 1055, for about
// a minute, then "did not respond", 1053), and while it keeps starting them,
// services the first one starts may time out too. A prefix booted any other
// way, or whose wineserver restarted, runs one services.exe.
//
// So under wine (and only there: ntdll exports wine_get_version) the service
// verbs first stop any services.exe but the one whose manager runs services,
// with the processes it started; the prefix is then as wine means it to be.
// On Windows, and under wine with one services.exe, this does nothing.

#include <windows.h>

#include <string>

namespace dmlserve {

bool RunningUnderWine();

// Once per process, under wine: stops every services.exe but the one whose
// manager runs services (the parent of a RUNNING service's process), and the
// processes each stopped one started. Returns what it did, for the log
// (empty when there was nothing to do, or it could not tell which manager
// works: then it leaves everything as it is).
std::string StopDuplicateWineServiceManagers();

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_WINE_SERVICE_MANAGERS_H_
