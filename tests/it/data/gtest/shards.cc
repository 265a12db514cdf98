// Six tests that report which GPU their process was shown: the gtest
// adapter's sharding test (tests/it/suite_tests.rs) checks that each shard's
// process saw exactly one GPU, and the two shards different ones.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

static std::string var(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "(unset)";
}

class Shard : public ::testing::TestWithParam<int> {};

TEST_P(Shard, SeesOneGpu) {
  std::string visible = var("ROCR_VISIBLE_DEVICES");
  std::printf("visible=%s hip=%s\n", visible.c_str(), var("HIP_VISIBLE_DEVICES").c_str());
  EXPECT_NE(visible, "(unset)");
  EXPECT_EQ(visible.find(','), std::string::npos) << "more than one GPU: " << visible;
  EXPECT_EQ(var("HIP_VISIBLE_DEVICES"), "0");
}

INSTANTIATE_TEST_SUITE_P(All, Shard, ::testing::Range(0, 6));
