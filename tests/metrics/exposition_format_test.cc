#include "server/metrics/exposition_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

namespace dmlserve::metrics {
namespace {

std::string EscapedHelp(const std::string& text) {
  std::string out;
  AppendEscapedHelp(text, &out);
  return out;
}

std::string EscapedLabelValue(const std::string& text) {
  std::string out;
  AppendEscapedLabelValue(text, &out);
  return out;
}

TEST(ExpositionFormatTest, MetricNames) {
  EXPECT_TRUE(IsValidMetricName("dmlserve_requests_total"));
  EXPECT_TRUE(IsValidMetricName("_x"));
  EXPECT_TRUE(IsValidMetricName("job:rate5m:sum"));
  EXPECT_TRUE(IsValidMetricName("A9"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("9a"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName("a b"));
  EXPECT_FALSE(IsValidMetricName("a.b"));
  EXPECT_FALSE(IsValidMetricName("durée"));
}

TEST(ExpositionFormatTest, LabelNames) {
  EXPECT_TRUE(IsValidLabelName("operator"));
  EXPECT_TRUE(IsValidLabelName("_private"));
  EXPECT_TRUE(IsValidLabelName("le"));
  EXPECT_TRUE(IsValidLabelName("a1"));
  EXPECT_FALSE(IsValidLabelName(""));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("__x"));
  EXPECT_FALSE(IsValidLabelName("a:b"));  // colons are for metric names only
  EXPECT_FALSE(IsValidLabelName("1a"));
  EXPECT_FALSE(IsValidLabelName("a-b"));
}

TEST(ExpositionFormatTest, SpecialValues) {
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(ExpositionFormatTest, IntegersWithoutExponent) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(1), "1");
  EXPECT_EQ(FormatSampleValue(-1), "-1");
  EXPECT_EQ(FormatSampleValue(1e6), "1000000");
  EXPECT_EQ(FormatSampleValue(123456789012345.0), "123456789012345");
  EXPECT_EQ(FormatSampleValue(9007199254740991.0), "9007199254740991");  // 2^53 - 1
}

TEST(ExpositionFormatTest, FractionsShortestRoundTrip) {
  EXPECT_EQ(FormatSampleValue(0.1), "0.1");
  EXPECT_EQ(FormatSampleValue(0.005), "0.005");
  EXPECT_EQ(FormatSampleValue(2.5), "2.5");
  EXPECT_EQ(FormatSampleValue(-0.25), "-0.25");
  EXPECT_EQ(FormatSampleValue(5e-05), "5e-05");
  EXPECT_EQ(FormatSampleValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatSampleValue(1e300), "1e+300");
  EXPECT_EQ(FormatSampleValue(0.1 + 0.2), "0.30000000000000004");
}

TEST(ExpositionFormatTest, EveryFiniteValueReadsBackExactly) {
  std::mt19937_64 random(42);
  std::uniform_int_distribution<int> exponent(-320, 310);
  std::uniform_real_distribution<double> mantissa(-10, 10);
  for (int i = 0; i < 100000; ++i) {
    const double value = mantissa(random) * std::pow(10.0, exponent(random));
    if (!std::isfinite(value)) continue;
    const std::string text = FormatSampleValue(value);
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    ASSERT_EQ(*end, '\0') << text;
    ASSERT_EQ(parsed, value) << text;
  }
}

TEST(ExpositionFormatTest, HelpEscapesBackslashAndNewlineOnly) {
  EXPECT_EQ(EscapedHelp("plain text"), "plain text");
  EXPECT_EQ(EscapedHelp("a\\b"), "a\\\\b");
  EXPECT_EQ(EscapedHelp("line1\nline2"), "line1\\nline2");
  EXPECT_EQ(EscapedHelp("say \"hi\""), "say \"hi\"");
}

TEST(ExpositionFormatTest, LabelValueEscapesBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapedLabelValue("cpu:0"), "cpu:0");
  EXPECT_EQ(EscapedLabelValue("C:\\dir"), "C:\\\\dir");
  EXPECT_EQ(EscapedLabelValue("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(EscapedLabelValue("a\nb"), "a\\nb");
  EXPECT_EQ(EscapedLabelValue("tab\there"), "tab\there");
  EXPECT_EQ(EscapedLabelValue(""), "");
}

TEST(ExpositionFormatTest, Utf8KeptInvalidBytesReplaced) {
  EXPECT_EQ(EscapedLabelValue("50 \xC2\xB5s"), "50 \xC2\xB5s");          // µ
  EXPECT_EQ(EscapedLabelValue("\xE2\x82\xAC"), "\xE2\x82\xAC");          // €
  EXPECT_EQ(EscapedLabelValue("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");  // emoji
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(EscapedLabelValue("a\xFF"
                              "b"),
            "a" + replacement + "b");
  EXPECT_EQ(EscapedLabelValue("\xC0\xAF"), replacement + replacement);  // overlong '/'
  EXPECT_EQ(EscapedLabelValue("\xED\xA0\x80"), replacement + replacement + replacement);
  EXPECT_EQ(EscapedLabelValue("\xE2\x82"), replacement + replacement);  // truncated
  EXPECT_EQ(EscapedHelp("x\xFE"), "x" + replacement);
}

}  // namespace
}  // namespace dmlserve::metrics
