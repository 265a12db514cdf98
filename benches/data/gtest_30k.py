import sys
# 2,000 plain tests (20 suites x 100), 25,000 value-parameterised (25 TEST_P x Range(0,1000)),
# 3,000 typed (30 TYPED_TEST x 100 types): 30,000 in all, each a unique id 0..29999.
out = []
w = out.append
w('#include <gtest/gtest.h>')
w('#include <csignal>')
w('#include <cstring>')
w('#include <type_traits>')
w('#include <unistd.h>')
w('// A binary whose name ends in "-crashy" crashes in 1% of its tests.')
w('static bool Crashy() {')
w('  static const bool crashy = [] {')
w('    char b[4096];')
w('    ssize_t n = readlink("/proc/self/exe", b, sizeof b - 1);')
w('    if (n < 0) return false;')
w('    b[n] = 0;')
w('    return n >= 7 && std::strcmp(b + n - 7, "-crashy") == 0;')
w('  }();')
w('  return crashy;')
w('}')
w('static void Check(int id) {')
w('  if (Crashy() && id % 100 == 42) std::raise(SIGSEGV);')
w('  EXPECT_GE(id, 0);')
w('}')
w('#define T(s, n) TEST(s, n) { Check(__COUNTER__); }')
w('#define P10(s, p) T(s, p##0) T(s, p##1) T(s, p##2) T(s, p##3) T(s, p##4) T(s, p##5) T(s, p##6) T(s, p##7) T(s, p##8) T(s, p##9)')
w('#define P100(s, p) P10(s, p##0) P10(s, p##1) P10(s, p##2) P10(s, p##3) P10(s, p##4) P10(s, p##5) P10(s, p##6) P10(s, p##7) P10(s, p##8) P10(s, p##9)')
for s in range(20):
    w(f'P100(Plain{s:02d}, Case)')
w('class Param : public ::testing::TestWithParam<int> {};')
for p in range(25):
    w(f'TEST_P(Param, Kernel{p:02d}) {{ Check(2000 + {p} * 1000 + GetParam()); }}')
w('INSTANTIATE_TEST_SUITE_P(Values, Param, ::testing::Range(0, 1000));')
w('template <typename T> class Typed : public ::testing::Test {};')
w('using Ints = ::testing::Types<' + ', '.join(f'std::integral_constant<int, {i}>' for i in range(100)) + '>;')
w('TYPED_TEST_SUITE(Typed, Ints);')
for t in range(30):
    w(f'TYPED_TEST(Typed, Op{t:02d}) {{ Check(27000 + {t} * 100 + TypeParam::value); }}')
print('\n'.join(out))
