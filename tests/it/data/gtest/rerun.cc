// Tests for `rerun_failures:`: one fails the first time it runs and passes
// when run again (a marker file in the container says it ran before), one
// fails every time, one passes. tests/it/suite_tests.rs expects the first
// to be flaky (<flakyFailure>), the second to keep its failure beside its
// <rerunFailure>s.
#include <gtest/gtest.h>

#include <cstdio>
#include <unistd.h>

TEST(Rerun, PassesTheSecondTime) {
  if (access("/tmp/rerun-marker", F_OK) != 0) {
    std::FILE *f = std::fopen("/tmp/rerun-marker", "w");
    if (f) std::fclose(f);
    FAIL() << "queue not ready yet";
  }
}

TEST(Rerun, AlwaysFails) { FAIL() << "wrong answer: 41"; }

TEST(Rerun, Passes) { SUCCEED(); }
