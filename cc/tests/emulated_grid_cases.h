// The cases and input values of cc/tests/cuda_emulated_grid.cc: exhaustive
// where the kernel's index arithmetic can go wrong (every size up to 1,100,
// every start offset of in and out within 16 bytes, every 16-bit pattern),
// sampled elsewhere (lambda and the device's resident blocks rotate over the
// cases), so that the whole run takes seconds.
#ifndef GRAD_REVERSE_CC_TESTS_EMULATED_GRID_CASES_H_
#define GRAD_REVERSE_CC_TESTS_EMULATED_GRID_CASES_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cc/compute/grad_reverse_launcher.h"

namespace emulated {

using grad_reverse::DType;

constexpr DType kDTypes[] = {DType::kHalf, DType::kBFloat16, DType::kFloat, DType::kDouble};

inline const char* DTypeName(DType dtype) {
  constexpr const char* kNames[] = {"half", "bfloat16", "float", "double"};
  return kNames[static_cast<int>(dtype)];
}

// The bits of one element of `size` bytes at `p`.
inline uint64_t ElementBits(const unsigned char* p, int64_t size) {
  uint16_t b16;
  uint32_t b32;
  uint64_t b64;
  switch (size) {
    case 2:
      std::memcpy(&b16, p, 2);
      return b16;
    case 4:
      std::memcpy(&b32, p, 4);
      return b32;
    default:
      std::memcpy(&b64, p, 8);
      return b64;
  }
}

// Whether `bits` is a NaN of the type of that size (binary16 for 2 bytes;
// bfloat16 is told apart by the caller's dtype, so it is passed as size 3).
inline bool IsNanBits(uint64_t bits, int size) {
  switch (size) {
    case 2:
      return (bits & 0x7fffu) > 0x7c00u;
    case 3:
      return (bits & 0x7fffu) > 0x7f80u;
    case 4:
      return (bits & 0x7fffffffu) > 0x7f800000u;
    default:
      return (bits & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
  }
}

inline bool IsNan(uint64_t bits, DType dtype) {
  const int kind[] = {2, 3, 4, 8};
  return IsNanBits(bits, kind[static_cast<int>(dtype)]);
}

// Input values per dtype, as raw little-endian bytes. half and bfloat16:
// every 16-bit pattern, in order (a case that starts at 0 and runs 65,536
// elements sees each once). float and double: signed zeros, infinities,
// quiet, signalling and negative NaNs, the extremes, the smallest normal,
// subnormals, then random bit patterns and random values of moderate size.
class ValuePools {
 public:
  ValuePools() {
    for (uint32_t b = 0; b < 65536; ++b) Append(sixteen_, static_cast<uint16_t>(b));
    sixteen_bfloat_ = sixteen_;
    std::mt19937_64 random(38);
    const uint32_t float_specials[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
                                       0xffc00000, 0x7f800001, 0x7fbfffff, 0x7fc12345, 0x7f7fffff,
                                       0xff7fffff, 0x00800000, 0x80800000, 0x00000001, 0x80000001,
                                       0x007fffff, 0x807fffff, 0x00400000, 0x3f800000, 0xbf800000,
                                       0x7f000000, 0x0c000000, 0x33800000, 0x477fe000, 0x38800000};
    for (uint32_t b : float_specials) Append(float_, b);
    const uint64_t double_specials[] = {0x0ull,
                                        0x8000000000000000ull,
                                        0x7ff0000000000000ull,
                                        0xfff0000000000000ull,
                                        0x7ff8000000000000ull,
                                        0xfff8000000000000ull,
                                        0x7ff0000000000001ull,
                                        0x7ff4000000000000ull,
                                        0x7fefffffffffffffull,
                                        0xffefffffffffffffull,
                                        0x0010000000000000ull,
                                        0x8010000000000000ull,
                                        0x0000000000000001ull,
                                        0x800fffffffffffffull,
                                        0x3ff0000000000000ull,
                                        0xbff0000000000000ull,
                                        0x47efffffe0000000ull,
                                        0x36a0000000000000ull,
                                        0x7fe0000000000000ull};
    for (uint64_t b : double_specials) Append(double_, b);
    std::normal_distribution<double> normal(0.0, 30.0);
    while (float_.size() < 8192 * 4) {
      const float f = static_cast<float>(normal(random));
      uint32_t b;
      std::memcpy(&b, &f, 4);
      Append(float_, float_.size() % 8 == 0 ? b : static_cast<uint32_t>(random()));
    }
    while (double_.size() < 8192 * 8) {
      const double d = normal(random);
      uint64_t b;
      std::memcpy(&b, &d, 8);
      Append(double_, double_.size() % 16 == 0 ? b : random());
    }
  }

  const std::vector<unsigned char>& of(DType dtype) const {
    switch (dtype) {
      case DType::kHalf:
        return sixteen_;
      case DType::kBFloat16:
        return sixteen_bfloat_;
      case DType::kFloat:
        return float_;
      case DType::kDouble:
        break;
    }
    return double_;
  }

 private:
  template <typename U>
  static void Append(std::vector<unsigned char>& pool, U value) {
    const size_t at = pool.size();
    pool.resize(at + sizeof(U));
    std::memcpy(pool.data() + at, &value, sizeof(U));
  }
  std::vector<unsigned char> sixteen_, sixteen_bfloat_, float_, double_;
};

struct Case {
  DType dtype;
  int64_t n;
  int in_offset;   // bytes past a 16-byte boundary
  int out_offset;  // equals in_offset in place
  bool in_place;
  float lambda;
  int resident;         // resident blocks of the emulated device
  int64_t value_start;  // first element of the value pool
};

// Zero, negative, tiny (normal and subnormal) and huge finite lambdas among ordinary ones.
constexpr float kLambdas[] = {1.0f, 0.0f,   -0.0f,    -1.0f,   -0.37f,  6.0f,
                              0.1f, 1e-38f, 1.4e-45f, 3.0e38f, -2.5e37f};
constexpr int kNumLambdas = sizeof(kLambdas) / sizeof(kLambdas[0]);

inline std::vector<Case> AllCases() {
  std::vector<Case> cases;
  int64_t k = 0;  // rotates lambda, resident blocks and where the values start
  auto add = [&](DType dtype, int64_t n, int in_offset, int out_offset, bool in_place,
                 int resident = 0) {
    cases.push_back({dtype, n, in_offset, in_place ? in_offset : out_offset, in_place,
                     kLambdas[k % kNumLambdas],
                     resident > 0 ? resident : 1 + static_cast<int>(k % 3), (k * 7919) % 65536});
    ++k;
  };
  std::vector<int64_t> small_sizes;
  for (int64_t n = 0; n <= 40; ++n) small_sizes.push_back(n);
  for (int64_t n : {63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 767, 768, 769, 1100}) {
    small_sizes.push_back(n);
  }
  std::mt19937_64 random(2015);
  for (DType dtype : kDTypes) {
    const int size = grad_reverse::DTypeSize(dtype);
    // Every size to 1,100 at every equal offset (the vector path, or the
    // unaligned one off the element alignment), in place and out of place.
    for (int64_t n = 0; n <= 1100; ++n) {
      for (int offset = 0; offset < 16; ++offset) {
        add(dtype, n, offset, offset, false);
        add(dtype, n, offset, offset, true);
      }
    }
    // Every pair of unequal offsets: the scalar and unaligned paths.
    for (int64_t n : small_sizes) {
      for (int in_offset = 0; in_offset < 16; ++in_offset) {
        for (int out_offset = 0; out_offset < 16; ++out_offset) {
          if (in_offset != out_offset) add(dtype, n, in_offset, out_offset, false);
        }
      }
    }
    // Large random sizes on 2 or 3 resident blocks: every grid-stride loop
    // runs several rounds (a vector per thread is 8 halves or 2 doubles).
    for (int i = 0; i < 6; ++i) {
      const int64_t n = 6200 + static_cast<int64_t>(random() % 64000);
      const int pairs[][2] = {{0, 0}, {size % 16, size % 16}, {14, 14}, {0, size}, {1, 1}, {3, 9}};
      for (const auto& pair : pairs) {
        add(dtype, n, pair[0], pair[1], false, 2 + i % 2);
        add(dtype, n, pair[0], pair[1], true, 2 + i % 2);
      }
    }
    // The whole value pool (every 16-bit pattern once) at every lambda, on each path.
    const int64_t pool_elements = size == 2 ? 65536 : 8192;
    for (float lambda : kLambdas) {
      const int layouts[][3] = {{0, 0, 0}, {6, 6, 0},   {0, 2, 0}, {1, 1, 0},
                                {0, 0, 1}, {10, 10, 1}, {3, 3, 1}};
      for (const auto& layout : layouts) {
        cases.push_back({dtype, pool_elements, layout[0], layout[layout[2] ? 0 : 1], layout[2] == 1,
                         lambda, 3, 0});
      }
    }
  }
  return cases;
}

}  // namespace emulated

#endif  // GRAD_REVERSE_CC_TESTS_EMULATED_GRID_CASES_H_
