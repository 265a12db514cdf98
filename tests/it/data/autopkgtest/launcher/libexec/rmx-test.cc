// A passing, a failing and a crashing test, and one after the crash.
#include <csignal>
#include <gtest/gtest.h>
TEST(Launched, Passes) { EXPECT_EQ(1 + 1, 2); }
TEST(Launched, Fails) { EXPECT_EQ(2 - 2, 1) << "two minus two is not one"; }
TEST(Launched, Crashes) { std::raise(SIGSEGV); }
TEST(Launched, AfterTheCrash) { SUCCEED(); }
