#include "tests/client/shared_server.h"

#include <memory>

#include "gtest/gtest.h"

namespace dmlserve::client::testing {
namespace {

std::unique_ptr<dmlserve::testing::ServerProcess>& ServerSlot() {
  static auto* const kServer = new std::unique_ptr<dmlserve::testing::ServerProcess>();
  return *kServer;
}

class SharedServerEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<dmlserve::testing::ServerProcess>> server =
        dmlserve::testing::ServerProcess::Start(DMLSERVE_BINARY);
    ASSERT_TRUE(server.ok()) << server.status();
    ServerSlot() = *std::move(server);
  }

  void TearDown() override {
    if (ServerSlot() == nullptr) return;
    absl::StatusOr<int> code = ServerSlot()->Stop();
    EXPECT_TRUE(code.ok()) << code.status();
    if (code.ok()) {
      EXPECT_EQ(*code, 0) << ServerSlot()->Output();
    }
    ServerSlot().reset();
  }
};

[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new SharedServerEnvironment);

}  // namespace

dmlserve::testing::ServerProcess& SharedServer() {
  // Environments run before any test, so a missing server means SetUp failed.
  if (ServerSlot() == nullptr) {
    ADD_FAILURE() << "dmlserve did not start";
    std::abort();
  }
  return *ServerSlot();
}

}  // namespace dmlserve::client::testing
