#ifndef DMLSERVE_TESTS_CLIENT_SHARED_SERVER_H_
#define DMLSERVE_TESTS_CLIENT_SHARED_SERVER_H_

#include "tests/server/server_process.h"

namespace dmlserve::client::testing {

// The dmlserve child process every test of this binary talks to, started
// once per test process (a gtest global environment) and stopped at the end.
dmlserve::testing::ServerProcess& SharedServer();

}  // namespace dmlserve::client::testing

#endif  // DMLSERVE_TESTS_CLIENT_SHARED_SERVER_H_
