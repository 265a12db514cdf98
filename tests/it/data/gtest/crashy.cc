// A googletest suite that misbehaves in every way a real suite can:
// the gtest adapter's integration test (tests/it/suite_tests.rs) runs it
// and checks that every test ends with exactly one outcome.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <thread>
#include <chrono>

TEST(Basic, Passes) { EXPECT_EQ(2 + 2, 4); }

TEST(Basic, FailsAnAssertion) {
  int computed = 6;
  EXPECT_EQ(computed, 7) << "GPU computed " << computed;
}

TEST(Basic, Skips) { GTEST_SKIP() << "needs a feature this host lacks"; }

TEST(Basic, DISABLED_NeverRuns) { FAIL(); }

TEST(Crash, Segfaults) {
  std::puts("about to dereference a null pointer");
  std::fflush(stdout);
  volatile int *p = nullptr;
  *p = 1;
}

TEST(Crash, AfterSegfault) { SUCCEED(); }

TEST(Crash, Aborts) {
  std::fputs("hipMalloc failed: hipErrorOutOfMemory\n", stderr);
  std::abort();
}

TEST(Crash, AfterAbort) { SUCCEED(); }

TEST(Crash, CallsExit) { std::exit(3); }

TEST(Crash, AfterExit) { SUCCEED(); }

TEST(Hang, SpinsForever) {
  std::puts("spinning");
  std::fflush(stdout);
  for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

TEST(Hang, AfterHang) { SUCCEED(); }

template <typename T> class Typed : public ::testing::Test {};
using Types = ::testing::Types<int, double>;
TYPED_TEST_SUITE(Typed, Types);
TYPED_TEST(Typed, ZeroIsFalse) { EXPECT_FALSE(static_cast<bool>(TypeParam(0))); }

class Param : public ::testing::TestWithParam<int> {};
TEST_P(Param, IsSmall) { EXPECT_LT(GetParam(), 3); }
INSTANTIATE_TEST_SUITE_P(Values, Param, ::testing::Values(1, 2, 5));

TEST(Gpu, NeedsADevice) {
  int err = 100;
  ASSERT_EQ(err, 0) << "hipMalloc(&p, 64) returned hipErrorNoDevice";
}
