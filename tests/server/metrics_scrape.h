#ifndef DMLSERVE_TESTS_SERVER_METRICS_SCRAPE_H_
#define DMLSERVE_TESTS_SERVER_METRICS_SCRAPE_H_

// Scraping /metrics over a plain socket and reading samples from the
// Prometheus text format.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dmlserve::testing {

// GET http://`address``path`; the body of a 200 response.
absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path);

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<Sample> ParseSamples(const std::string& exposition);

// The sum over samples named `name` whose labels include all of `labels`;
// nullopt when there is none.
std::optional<double> SumSamples(const std::vector<Sample>& samples, const std::string& name,
                                 const std::map<std::string, std::string>& labels = {});

// Scrapes `metrics_address` and sums as SumSamples does (nullopt on a failed
// scrape as well).
std::optional<double> ScrapeSum(const std::string& metrics_address, const std::string& name,
                                const std::map<std::string, std::string>& labels = {});

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SERVER_METRICS_SCRAPE_H_
