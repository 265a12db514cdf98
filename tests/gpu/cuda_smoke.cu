// cuda_smoke: a googletest suite for matrix/cuda-smoke.yaml, built with
// nvcc for sm_90 on the GPU machine by scripts/gpu-check. Its tests pass,
// fail an assertion on a GPU result, abort on an illegal memory access (as
// CUDA_CHECK-style macros do), hang a kernel past timeout_per_test, and
// report which GPU their process sees, so that sharding can be checked.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                     \
  do {                                                                       \
    cudaError_t err_ = (call);                                               \
    if (err_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "CUDA error %d (%s) at %s:%d: %s\n", (int)err_,   \
                   cudaGetErrorName(err_), __FILE__, __LINE__,               \
                   cudaGetErrorString(err_));                                \
      std::abort();                                                          \
    }                                                                        \
  } while (0)

__global__ void add(const int *a, const int *b, int *c) { *c = *a + *b; }

__global__ void store_far(int *p) { p[1 << 30] = 1; }

__global__ void spin(volatile int *flag) {
  while (*flag == 0) {
  }
}

static int gpu_add(int a, int b) {
  int *d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, 3 * sizeof(int)));
  int h[2] = {a, b};
  CUDA_CHECK(cudaMemcpy(d, h, 2 * sizeof(int), cudaMemcpyHostToDevice));
  add<<<1, 1>>>(d, d + 1, d + 2);
  CUDA_CHECK(cudaGetLastError());
  int c = 0;
  CUDA_CHECK(cudaMemcpy(&c, d + 2, sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d));
  return c;
}

static void print_device() {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  cudaDeviceProp p;
  CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  char uuid[64];
  std::snprintf(uuid, sizeof uuid,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                (unsigned char)p.uuid.bytes[0], (unsigned char)p.uuid.bytes[1],
                (unsigned char)p.uuid.bytes[2], (unsigned char)p.uuid.bytes[3],
                (unsigned char)p.uuid.bytes[4], (unsigned char)p.uuid.bytes[5],
                (unsigned char)p.uuid.bytes[6], (unsigned char)p.uuid.bytes[7],
                (unsigned char)p.uuid.bytes[8], (unsigned char)p.uuid.bytes[9],
                (unsigned char)p.uuid.bytes[10], (unsigned char)p.uuid.bytes[11],
                (unsigned char)p.uuid.bytes[12], (unsigned char)p.uuid.bytes[13],
                (unsigned char)p.uuid.bytes[14], (unsigned char)p.uuid.bytes[15]);
  std::printf("device count=%d uuid=%s name=%s sm_%d%d\n", count, uuid, p.name,
              p.major, p.minor);
  std::fflush(stdout);
}

TEST(Gpu, Adds) { EXPECT_EQ(gpu_add(2, 3), 5); }

TEST(Gpu, SeesOneDevice) {
  print_device();
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  EXPECT_EQ(count, 1);
}

TEST(Gpu, FailsOnGpuResult) {
  int computed = gpu_add(2, 4);
  EXPECT_EQ(computed, 7) << "GPU computed " << computed;
}

TEST(Gpu, IllegalAccessAborts) {
  int *d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, sizeof(int)));
  store_far<<<1, 1>>>(d);
  CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(Gpu, AfterIllegalAccess) { EXPECT_EQ(gpu_add(1, 1), 2); }

TEST(Gpu, HangsAKernel) {
  int *flag = nullptr;
  CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  CUDA_CHECK(cudaMemset(flag, 0, sizeof(int)));
  std::puts("launching a kernel that never ends");
  std::fflush(stdout);
  spin<<<1, 1>>>(flag);
  CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(Gpu, AfterHang) { EXPECT_EQ(gpu_add(20, 22), 42); }

class Shard : public ::testing::TestWithParam<int> {};
TEST_P(Shard, RunsOnItsGpu) {
  print_device();
  EXPECT_EQ(gpu_add(GetParam(), 1), GetParam() + 1);
}
INSTANTIATE_TEST_SUITE_P(Many, Shard, ::testing::Range(0, 4));
