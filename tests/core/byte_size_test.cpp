// core/byte_size: the units the command-line flags take, and the refusals.
#include <gtest/gtest.h>

#include "core/byte_size.h"

namespace densa {
namespace {

TEST(ByteSize, ParsesTheUnitsAndRefusesTheRest) {
  EXPECT_EQ(*parse_byte_size("80GiB"), 80LL << 30);
  EXPECT_EQ(*parse_byte_size("141G"), 141'000'000'000LL);
  EXPECT_EQ(*parse_byte_size("141GB"), 141'000'000'000LL);
  EXPECT_EQ(*parse_byte_size("1128gib"), 1128LL << 30);
  EXPECT_EQ(*parse_byte_size("1.5TiB"), 3LL << 39);
  EXPECT_EQ(*parse_byte_size("4096"), 4096);
  EXPECT_EQ(*parse_byte_size("512MiB"), 512LL << 20);
  EXPECT_FALSE(parse_byte_size("").is_ok());
  EXPECT_FALSE(parse_byte_size("GiB").is_ok());
  EXPECT_FALSE(parse_byte_size("12XB").is_ok());
  EXPECT_FALSE(parse_byte_size("-5G").is_ok());
}

}  // namespace
}  // namespace densa
