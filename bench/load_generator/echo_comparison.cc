#include "bench/load_generator/echo_comparison.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace dmlserve::load {
namespace {

// The best of a side's rounds at one level.
struct Best {
  double qps = 0;
  double p50 = std::numeric_limits<double>::infinity();
  double p99 = std::numeric_limits<double>::infinity();
  double mean_batch = 0;  // of the round with the best throughput
};

struct RoundFigures {
  double qps = 0;
  double p50 = 0;
  double p99 = 0;
  double mean_batch = 0;
};

RoundFigures FiguresOf(const RunResult& result) {
  RoundFigures figures;
  const LoadStats& stats = result.stats;
  figures.qps = stats.successes / absl::ToDoubleSeconds(result.elapsed);
  std::vector<double> sorted = stats.latencies;
  std::sort(sorted.begin(), sorted.end());
  figures.p50 = Percentile(sorted, 50);
  figures.p99 = Percentile(sorted, 99);
  double batch_sum = 0;
  for (const auto& [size, count] : stats.batch_sizes)
    batch_sum += static_cast<double>(size) * count;
  figures.mean_batch = stats.successes > 0 ? batch_sum / stats.successes : 0;
  return figures;
}

void Note(Best& best, const RoundFigures& figures) {
  if (figures.qps > best.qps) {
    best.qps = figures.qps;
    best.mean_batch = figures.mean_batch;
  }
  best.p50 = std::min(best.p50, figures.p50);
  best.p99 = std::min(best.p99, figures.p99);
}

std::string Micros(double seconds) { return absl::StrFormat("%.0f µs", seconds * 1e6); }

// dmlserve's figure over echo's in each round, the two runs of a round back
// to back. On a machine whose speed drifts, a round's ratio compares like
// with like, where the two sides' best rounds may come from different
// spells; the sides alternate which goes first, so a drift within a round
// favours neither.
struct PairedRatios {
  std::vector<double> qps;
  std::vector<double> p50;
};

// The median (p50, nearest rank), lowest and highest.
std::string Spread(std::vector<double> values) {
  if (values.empty()) return "-";
  std::sort(values.begin(), values.end());
  return absl::StrFormat("%.2fx (%.2f-%.2f)", Percentile(values, 50), values.front(),
                         values.back());
}

}  // namespace

absl::StatusOr<std::vector<LoadLevel>> ParseLoadLevels(const std::string& text) {
  std::vector<LoadLevel> levels;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> sides = absl::StrSplit(part, 'x');
    LoadLevel level;
    if (!absl::SimpleAtoi(sides.first, &level.channels) ||
        !absl::SimpleAtoi(sides.second, &level.calls_per_channel) || level.channels < 1 ||
        level.calls_per_channel < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad load '", part, "': expected CHANNELSxCALLS, e.g. 4x8"));
    }
    levels.push_back(level);
  }
  if (levels.empty()) return absl::InvalidArgumentError("no load levels given");
  return levels;
}

LoadStats CompareWithEcho(const ComparisonTarget& echo, const ComparisonTarget& dmlserve,
                          const Workload& workload, const RunOptions& base,
                          const std::vector<LoadLevel>& levels, int rounds, std::ostream& out) {
  LoadStats dmlserve_stats;
  std::vector<std::pair<Best, Best>> table;  // (echo, dmlserve) per level
  std::vector<PairedRatios> paired(levels.size());
  for (size_t i = 0; i < levels.size(); ++i) {
    const LoadLevel& level = levels[i];
    Best best[2];
    for (int round = 1; round <= rounds; ++round) {
      RoundFigures figures_of[2];
      for (int turn = 0; turn < 2; ++turn) {
        const int side = round % 2 == 1 ? turn : 1 - turn;  // echo first in odd rounds
        const ComparisonTarget& target = side == 0 ? echo : dmlserve;
        RunOptions options = base;
        options.channels = level.channels;
        options.calls_per_channel = level.calls_per_channel;
        options.target_rate = 0;
        if (!target.verify) options.verify_every = 0;
        const RunResult result = RunLoad(target.channels, workload, options);
        const RoundFigures figures = FiguresOf(result);
        figures_of[side] = figures;
        Note(best[side], figures);
        out << absl::StrFormat(
            "%dx%d round %d %-8s %9.0f req/s  p50 %s  p99 %s  mean batch %.2f  errors %d\n",
            level.channels, level.calls_per_channel, round, target.name, figures.qps,
            Micros(figures.p50), Micros(figures.p99), figures.mean_batch,
            result.stats.requests - result.stats.successes);
        if (side == 1) dmlserve_stats.Merge(result.stats);
      }
      if (figures_of[0].qps > 0 && figures_of[0].p50 > 0) {
        paired[i].qps.push_back(figures_of[1].qps / figures_of[0].qps);
        paired[i].p50.push_back(figures_of[1].p50 / figures_of[0].p50);
      }
    }
    table.emplace_back(best[0], best[1]);
  }

  out << "\nround by round (dmlserve / echo within each round; median, lowest-highest):\n\n"
      << "| load (channels x calls) | rounds | req/s ratio | p50 ratio |\n"
      << "|---|---|---|---|\n";
  for (size_t i = 0; i < levels.size(); ++i) {
    out << absl::StrFormat("| %dx%d | %d | %s | %s |\n", levels[i].channels,
                           levels[i].calls_per_channel, paired[i].qps.size(), Spread(paired[i].qps),
                           Spread(paired[i].p50));
  }
  out << "\nbest of " << rounds << " interleaved rounds per side:\n\n"
      << "| load (channels x calls) | echo req/s | dmlserve req/s | ratio | echo p50 | dmlserve "
         "p50 "
         "| ratio | echo p99 | dmlserve p99 | ratio | dmlserve mean batch |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < levels.size(); ++i) {
    const Best& e = table[i].first;
    const Best& d = table[i].second;
    out << absl::StrFormat(
        "| %dx%d | %.0f | %.0f | %.2fx | %s | %s | %.2fx | %s | %s | %.2fx | %.2f |\n",
        levels[i].channels, levels[i].calls_per_channel, e.qps, d.qps, d.qps / e.qps, Micros(e.p50),
        Micros(d.p50), d.p50 / e.p50, Micros(e.p99), Micros(d.p99), d.p99 / e.p99, d.mean_batch);
  }
  return dmlserve_stats;
}

}  // namespace dmlserve::load
