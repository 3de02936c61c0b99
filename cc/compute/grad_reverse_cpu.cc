// CPU kernels of out = -lambda * in: the portable ones, and the choice between
// them and the x86 vector ones (cpu_paths.h). TensorFlow's CPU OpKernel runs
// the chosen kernel on shards over its intra-op pool; the pybind11 module runs
// it on one thread.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_paths.h"
#include "grad_reverse_launcher.h"
#include "half_bits.h"
#include "neg_scale_x86.h"

namespace grad_reverse {
namespace {

// ------------------------------------------------------------ portable ----

template <typename T>
void NativePortable(const void* in, void* out, int64_t n, float scale) {
  const T s = static_cast<T>(scale);
  for (int64_t i = 0; i < n; ++i) StoreAt<T>(out, i, LoadAt<T>(in, i) * s);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void SixteenBitPortable(const void* in, void* out, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    StoreAt<uint16_t>(out, i, FromFloat(ToFloat(LoadAt<uint16_t>(in, i)) * scale));
  }
}

// ------------------------------------------------------------ dispatch ----

// kKernels[path][dtype], dtype in DType order (half, bfloat16, float, double).
// A path that does not vectorize a type repeats the next slower path's kernel.
using KernelRow = NegScaleFn[4];
constexpr KernelRow kPortableRow = {
    SixteenBitPortable<HalfToFloat, FloatToHalf>,
    SixteenBitPortable<BFloat16ToFloat, FloatToBFloat16>,
    NativePortable<float>,
    NativePortable<double>,
};

const NegScaleFn* KernelsOf(CpuPath path, bool streaming_stores) {
#if GRAD_REVERSE_X86_PATHS
  static constexpr KernelRow kAvx2Row = {x86::HalfAvx2, x86::BFloat16Avx2, x86::FloatAvx2,
                                         x86::DoubleAvx2};
  static constexpr KernelRow kAvx512Row = {x86::HalfAvx512, x86::BFloat16Avx512, x86::FloatAvx512,
                                           x86::DoubleAvx512};
  static constexpr KernelRow kAvx512Bf16Row = {x86::HalfAvx512, x86::BFloat16Avx512Bf16,
                                               x86::FloatAvx512, x86::DoubleAvx512};
  static constexpr KernelRow kAvx2StreamingRow = {
      x86::HalfAvx2Streaming, x86::BFloat16Avx2Streaming, x86::FloatAvx2Streaming,
      x86::DoubleAvx2Streaming};
  static constexpr KernelRow kAvx512StreamingRow = {
      x86::HalfAvx512Streaming, x86::BFloat16Avx512Streaming, x86::FloatAvx512Streaming,
      x86::DoubleAvx512Streaming};
  static constexpr KernelRow kAvx512Bf16StreamingRow = {
      x86::HalfAvx512Streaming, x86::BFloat16Avx512Bf16Streaming, x86::FloatAvx512Streaming,
      x86::DoubleAvx512Streaming};
  switch (path) {
    case CpuPath::kAvx2:
      return streaming_stores ? kAvx2StreamingRow : kAvx2Row;
    case CpuPath::kAvx512:
      return streaming_stores ? kAvx512StreamingRow : kAvx512Row;
    case CpuPath::kAvx512Bf16:
      return streaming_stores ? kAvx512Bf16StreamingRow : kAvx512Bf16Row;
    case CpuPath::kPortable:
      break;
  }
#endif
  (void)path;
  (void)streaming_stores;
  return kPortableRow;
}

constexpr const char* kCpuPathNames[kNumCpuPaths] = {"portable", "avx2", "avx512", "avx512bf16"};
constexpr const char* kEnvironmentVariable = "GRAD_REVERSE_CPU_PATH";

bool SupportedByThisCpu(CpuPath path) {
  switch (path) {
    case CpuPath::kPortable:
      return true;
#if GRAD_REVERSE_X86_PATHS
    case CpuPath::kAvx2:
      return x86::HasAvx2F16c();
    case CpuPath::kAvx512:
      return x86::HasAvx512();
    case CpuPath::kAvx512Bf16:
      return x86::HasAvx512Bf16();
#else
    default:
      return false;
#endif
  }
  return false;
}

CpuPath FastestSupported() {
  for (int p = kNumCpuPaths - 1; p > 0; --p) {
    if (SupportedByThisCpu(static_cast<CpuPath>(p))) return static_cast<CpuPath>(p);
  }
  return CpuPath::kPortable;
}

// -1: unknown name.
int PathIndex(const std::string& name) {
  for (int p = 0; p < kNumCpuPaths; ++p) {
    if (name == kCpuPathNames[p]) return p;
  }
  return -1;
}

struct EnvironmentChoice {
  CpuPath path = CpuPath::kPortable;
  std::string error;  // why the variable's value cannot be honoured, or empty
};

EnvironmentChoice ReadEnvironment() {
  EnvironmentChoice choice;
  choice.path = FastestSupported();
  const char* value = std::getenv(kEnvironmentVariable);
  if (value == nullptr || *value == '\0' || std::string(value) == "auto") return choice;
  const int index = PathIndex(value);
  if (index >= 0 && SupportedByThisCpu(static_cast<CpuPath>(index))) {
    choice.path = static_cast<CpuPath>(index);
    return choice;
  }
  std::string supported;
  for (const std::string& name : SupportedCpuPathNames()) {
    supported += (supported.empty() ? "" : ", ") + name;
  }
  choice.error = std::string(kEnvironmentVariable) + "='" + value + "' " +
                 (index < 0 ? "is not a CPU path" : "is not supported by this CPU") +
                 "; accepted here: auto, " + supported;
  return choice;
}

// Read once, at the first use, so that every call of a process agrees.
const EnvironmentChoice& Environment() {
  static const EnvironmentChoice choice = ReadEnvironment();
  return choice;
}

// The path set by ForceCpuPath, or -1.
std::atomic<int> forced_path{-1};

// ------------------------------------------------------- streaming stores ----

enum class StoresMode : int { kAuto = 0, kOn = 1, kOff = 2 };
constexpr const char* kStoresModeNames[] = {"auto", "on", "off"};
constexpr const char* kStoresVariable = "GRAD_REVERSE_STREAMING_STORES";
constexpr int kCalibrationSamples = 2 * kStreamingCalibrationPairs;

int StoresModeIndex(const std::string& name) {
  for (int m = 0; m < 3; ++m) {
    if (name == kStoresModeNames[m]) return m;
  }
  return -1;
}

struct StoresChoice {
  StoresMode mode = StoresMode::kAuto;
  std::string error;  // why the variable's value was not honoured, or empty
};

StoresChoice ReadStoresEnvironment() {
  StoresChoice choice;
  const char* value = std::getenv(kStoresVariable);
  if (value == nullptr || *value == '\0') return choice;
  const int index = StoresModeIndex(value);
  if (index >= 0) {
    choice.mode = static_cast<StoresMode>(index);
  } else {
    choice.error = std::string(kStoresVariable) + "='" + value +
                   "' is not a streaming-store mode; accepted: auto, on, off";
  }
  return choice;
}

const StoresChoice& StoresEnvironment() {
  static const StoresChoice choice = ReadStoresEnvironment();
  return choice;
}

// The mode set by ForceStreamingStores (0: auto, the environment's choice).
std::atomic<int> forced_stores{0};

StoresMode ActiveStoresMode() {
  const int forced = forced_stores.load(std::memory_order_relaxed);
  return forced > 0 ? static_cast<StoresMode>(forced) : StoresEnvironment().mode;
}

// Pair i is samples 2i and 2i + 1; which of the two streams alternates from
// pair to pair, so neither kind always runs first (a machine's state drifts).
bool SampleIsStreaming(int sample) { return (sample % 2 == 1) == ((sample / 2) % 2 == 0); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Calibration {
  std::mutex mutex;
  int next_sample = 0;   // slots handed out
  int samples_done = 0;  // slots filled
  double plain_times[kStreamingCalibrationPairs] = {};
  double streaming_times[kStreamingCalibrationPairs] = {};
  bool decided = false;
  bool streaming = false;
  std::string summary;

  void Decide() {
    streaming = StreamingStoresWin(plain_times, streaming_times, kStreamingCalibrationPairs);
    constexpr int kPairs = kStreamingCalibrationPairs;
    double ratios[kPairs];
    for (int i = 0; i < kPairs; ++i) ratios[i] = plain_times[i] / streaming_times[i];
    std::sort(ratios, ratios + kPairs);
    const double fastest = *std::min_element(plain_times, plain_times + kPairs) /
                           *std::min_element(streaming_times, streaming_times + kPairs);
    char text[200];
    std::snprintf(text, sizeof(text),
                  "fastest plain / fastest streaming pass %.2f over %d pairs, streaming needs "
                  "> %.2f; pair by pair %.2f-%.2f",
                  fastest, kPairs, 1.0 + kStreamingStoresMargin, ratios[0], ratios[kPairs - 1]);
    summary = text;
    decided = true;
  }
};

std::atomic<int64_t> streaming_store_passes{0};

// One per size class (StreamingSizeClass). Never destroyed, like the thread
// pool (a pass may run during exit()).
Calibration& TheCalibration(int size_class) {
  static Calibration* calibrations = new Calibration[kStreamingSizeClasses];
  return calibrations[size_class];
}

// "16-32 MiB", ..., "512 MiB or more".
std::string SizeClassLabel(int size_class) {
  const int64_t low = (kStreamingStoresMinBytes << size_class) >> 20;
  if (size_class + 1 == kStreamingSizeClasses) return std::to_string(low) + " MiB or more";
  return std::to_string(low) + "-" + std::to_string(2 * low) + " MiB";
}

}  // namespace

const char* CpuPathName(CpuPath path) {
  const int index = static_cast<int>(path);
  return index >= 0 && index < kNumCpuPaths ? kCpuPathNames[index] : "unknown";
}

bool CpuPathSupported(CpuPath path) {
  static const bool supported[kNumCpuPaths] = {
      SupportedByThisCpu(CpuPath::kPortable), SupportedByThisCpu(CpuPath::kAvx2),
      SupportedByThisCpu(CpuPath::kAvx512), SupportedByThisCpu(CpuPath::kAvx512Bf16)};
  const int index = static_cast<int>(path);
  return index >= 0 && index < kNumCpuPaths && supported[index];
}

std::vector<std::string> SupportedCpuPathNames() {
  std::vector<std::string> names;
  for (int p = 0; p < kNumCpuPaths; ++p) {
    if (CpuPathSupported(static_cast<CpuPath>(p))) names.emplace_back(kCpuPathNames[p]);
  }
  return names;
}

CpuPath ActiveCpuPath() {
  const int forced = forced_path.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<CpuPath>(forced) : Environment().path;
}

std::string CpuPathError() {
  if (forced_path.load(std::memory_order_relaxed) < 0 && !Environment().error.empty()) {
    return Environment().error;
  }
  if (forced_stores.load(std::memory_order_relaxed) == 0) return StoresEnvironment().error;
  return std::string();
}

bool ForceCpuPath(const std::string& name) {
  if (name == "auto") {
    forced_path.store(-1, std::memory_order_relaxed);
    return true;
  }
  const int index = PathIndex(name);
  if (index < 0 || !CpuPathSupported(static_cast<CpuPath>(index))) return false;
  forced_path.store(index, std::memory_order_relaxed);
  return true;
}

NegScaleFn NegScaleCpuFunction(DType dtype, bool streaming_stores) {
  return KernelsOf(ActiveCpuPath(), streaming_stores)[static_cast<int>(dtype)];
}

bool StreamingStoresWin(const double* plain, const double* streaming, int pairs) {
  if (pairs < 1) return false;
  for (int i = 0; i < pairs; ++i) {
    if (!(plain[i] > 0.0) || !(streaming[i] > 0.0)) return false;
  }
  const double fastest_plain = *std::min_element(plain, plain + pairs);
  const double fastest_streaming = *std::min_element(streaming, streaming + pairs);
  return fastest_plain / fastest_streaming > 1.0 + kStreamingStoresMargin;
}

bool ForceStreamingStores(const std::string& mode) {
  const int index = StoresModeIndex(mode);
  if (index < 0) return false;
  forced_stores.store(index, std::memory_order_relaxed);
  return true;
}

std::string StreamingStoresState() {
  const int forced = forced_stores.load(std::memory_order_relaxed);
  const StoresMode mode = forced > 0 ? static_cast<StoresMode>(forced) : StoresEnvironment().mode;
  if (mode != StoresMode::kAuto) {
    const std::string on_off = mode == StoresMode::kOn ? "on" : "off";
    return on_off + (forced > 0 ? " (forced at run time)"
                                : " (forced: " + std::string(kStoresVariable) + "=" + on_off + ")");
  }
  if (forced == 0 && !StoresEnvironment().error.empty())
    return "error: " + StoresEnvironment().error;
  std::string decided;
  bool undecided = false;
  for (int k = 0; k < kStreamingSizeClasses; ++k) {
    Calibration& calibration = TheCalibration(k);
    std::lock_guard<std::mutex> lock(calibration.mutex);
    if (!calibration.decided) {
      undecided = true;
      continue;
    }
    decided += std::string(decided.empty() ? "" : "; ") + SizeClassLabel(k) + " " +
               (calibration.streaming ? "on" : "off") + " (" + calibration.summary + ")";
  }
  if (decided.empty()) {
    return "not decided yet (auto: for each output size, in doublings from " +
           std::to_string(kStreamingStoresMinBytes >> 20) + " MiB, the first " +
           std::to_string(2 * kStreamingCalibrationPairs) +
           " out-of-place passes time plain and streaming stores in turn)";
  }
  return "auto, measured per output size: " + decided +
         (undecided ? "; other sizes not decided yet" : "");
}

int StreamingStoresChoiceAt(int64_t bytes) {
  if (bytes < kStreamingStoresMinBytes) return 0;
  switch (ActiveStoresMode()) {
    case StoresMode::kOn:
      return 1;
    case StoresMode::kOff:
      return 0;
    case StoresMode::kAuto:
      break;
  }
  Calibration& calibration = TheCalibration(StreamingSizeClass(bytes));
  std::lock_guard<std::mutex> lock(calibration.mutex);
  return calibration.decided ? (calibration.streaming ? 1 : 0) : -1;
}

bool UseStreamingStores(const void* in, const void* out, int64_t bytes) {
  return in != out && StreamingStoresChoiceAt(bytes) == 1;
}

int64_t StreamingStorePasses() { return streaming_store_passes.load(std::memory_order_relaxed); }

StorePass::StorePass(const void* in, const void* out, int64_t bytes) : bytes_(bytes) {
  if (in == out || bytes < kStreamingStoresMinBytes) return;
  switch (ActiveStoresMode()) {
    case StoresMode::kOn:
      streaming_ = true;
      streaming_store_passes.fetch_add(1, std::memory_order_relaxed);
      return;
    case StoresMode::kOff:
      return;
    case StoresMode::kAuto:
      break;
  }
  Calibration& calibration = TheCalibration(StreamingSizeClass(bytes));
  {
    std::lock_guard<std::mutex> lock(calibration.mutex);
    if (calibration.decided || calibration.next_sample >= kCalibrationSamples) {
      // Passes that arrive while the last samples run take plain stores.
      streaming_ = calibration.decided && calibration.streaming;
      if (streaming_) streaming_store_passes.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    sample_ = calibration.next_sample++;
  }
  streaming_ = SampleIsStreaming(sample_);
  if (streaming_) streaming_store_passes.fetch_add(1, std::memory_order_relaxed);
  start_ns_ = NowNs();
}

StorePass::~StorePass() {
  if (sample_ < 0) return;
  const double seconds_per_byte =
      static_cast<double>(NowNs() - start_ns_) * 1e-9 / static_cast<double>(bytes_);
  Calibration& calibration = TheCalibration(StreamingSizeClass(bytes_));
  std::lock_guard<std::mutex> lock(calibration.mutex);
  (streaming_ ? calibration.streaming_times : calibration.plain_times)[sample_ / 2] =
      seconds_per_byte;
  if (++calibration.samples_done == kCalibrationSamples) calibration.Decide();
}

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat:
      return 4;
    case DType::kDouble:
      return 8;
  }
  return 0;
}

void NegScaleCpu(const void* in, void* out, int64_t n, float lambda, DType dtype) {
  const StorePass stores(in, out, n * DTypeSize(dtype));
  NegScaleCpuFunction(dtype, stores.streaming())(in, out, n, -lambda);
}

}  // namespace grad_reverse
