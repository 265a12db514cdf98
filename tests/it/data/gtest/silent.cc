// Hangs that say nothing, the usual shape of a GPU hang (a kernel that
// never ends, a queue that never drains): each sleeps without printing
// right after googletest's `[ RUN ]` line, as the first test of its
// process — the first process, and the ones started after a crash and
// after a hang — or after half a line with no newline. The gtest adapter's
// integration test (tests/it/suite_tests.rs) expects each to be timed out
// at `timeout_per_test` and blamed, and every other test to run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

static void hang() { std::this_thread::sleep_for(std::chrono::seconds(600)); }

TEST(Gamma, Hangs) { hang(); }

TEST(Gamma, Pass6) { SUCCEED(); }

TEST(Gamma, Segfaults) {
  volatile int *p = nullptr;
  *p = 1;
}

TEST(Gamma, HangsAfterCrash) { hang(); }

TEST(Gamma, PartialLineThenHangs) {
  std::fputs("waiting for the queue to drain", stdout);
  std::fflush(stdout);
  hang();
}

TEST(Gamma, Last) { SUCCEED(); }
