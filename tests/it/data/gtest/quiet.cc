// A googletest suite whose one process ends normally: tests that pass,
// fail, skip, are disabled, typed and value-parameterised (one parameter
// longer than a listing prints, one with a line break). The gtest adapter
// judges it from the process's report alone, without listing it first
// (tests/it/suite_tests.rs); tests/fixtures/gtest/ holds its listing and
// report as googletest 1.12.1 wrote them.
#include <gtest/gtest.h>

#include <string>

TEST(Basic, Passes) { EXPECT_EQ(2 + 2, 4); }

TEST(Basic, FailsAnAssertion) {
  int computed = 6;
  EXPECT_EQ(computed, 7) << "GPU computed " << computed;
}

TEST(Basic, Skips) { GTEST_SKIP() << "needs a feature this host lacks"; }

TEST(Basic, DISABLED_NeverRuns) { FAIL(); }

TEST(Later, Passes) { SUCCEED(); }

template <typename T> class Typed : public ::testing::Test {};
using Types = ::testing::Types<int, double>;
TYPED_TEST_SUITE(Typed, Types);
TYPED_TEST(Typed, ZeroIsFalse) { EXPECT_FALSE(static_cast<bool>(TypeParam(0))); }

class Param : public ::testing::TestWithParam<int> {};
TEST_P(Param, IsSmall) { EXPECT_LT(GetParam(), 3); }
INSTANTIATE_TEST_SUITE_P(Values, Param, ::testing::Values(1, 2, 5));

class Text : public ::testing::TestWithParam<std::string> {};
TEST_P(Text, IsNotEmpty) { EXPECT_FALSE(GetParam().empty()); }
INSTANTIATE_TEST_SUITE_P(Strings, Text,
                         ::testing::Values(std::string(300, 'x'),
                                           std::string("two\nlines")));
