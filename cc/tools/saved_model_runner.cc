// saved_model_runner: loads a SavedModel the way tensorflow_model_server does
// (tensorflow::LoadSavedModel, tag "serve", a Session) and runs one signature.
//
//   saved_model_runner [--library OP_LIBRARY.so]... [--signature NAME]
//                      EXPORT_DIR INPUT_KEY=DIM,DIM,...:V,V,... ...
//
// e.g. `saved_model_runner exports/dann/1 x=2,3:1,2,3,4,5,6`; a scalar input is
// `x=:5`. Each output is printed as one JSON line on stdout,
//   {"output": "KEY", "dtype": "float", "shape": [2, 3], "values": [...]}
// in signature-key order, floats with enough digits to round-trip exactly, so
// tests compare them bitwise with Python. Inputs and outputs may be float,
// double, half, bfloat16 (values written as floats), int32 or int64. Exit status: 0 ok, 1 usage,
// 2 op library failed to load, 3 SavedModel failed to load, 4 run failed.
//
// --library is what a TF Serving build with the op linked in provides; without
// it this is stock TF Serving, which cannot load op libraries at run time.
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tensorflow/c/c_api.h"
#include "tensorflow/cc/saved_model/loader.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/protobuf/meta_graph.pb.h"

namespace {

constexpr int kUsage = 1, kLibraryFailed = 2, kLoadFailed = 3, kRunFailed = 4;

struct Input {
  std::string key;
  std::vector<int64_t> shape;
  std::vector<double> values;
};

int Usage(const std::string& message) {
  std::fprintf(stderr,
               "saved_model_runner: %s\n"
               "usage: saved_model_runner [--library OP_LIBRARY.so]... "
               "[--signature NAME] EXPORT_DIR KEY=DIM,...:VALUE,... ...\n",
               message.c_str());
  return kUsage;
}

// Comma-separated numbers; an empty string gives none (a scalar's shape).
bool ParseNumbers(const std::string& text, std::vector<double>* out) {
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    char* end = nullptr;
    const double value = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0') return false;
    out->push_back(value);
  }
  return true;
}

bool ParseInput(const std::string& arg, Input* input) {
  const size_t eq = arg.find('=');
  const size_t colon = arg.find(':', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || colon == std::string::npos) {
    return false;
  }
  input->key = arg.substr(0, eq);
  std::vector<double> dims;
  if (!ParseNumbers(arg.substr(eq + 1, colon - eq - 1), &dims)) return false;
  for (double d : dims) {
    if (d < 0 || d != static_cast<int64_t>(d)) return false;
    input->shape.push_back(static_cast<int64_t>(d));
  }
  return ParseNumbers(arg.substr(colon + 1), &input->values);
}

template <typename T>
void Fill(const std::vector<double>& values, tensorflow::Tensor* tensor) {
  auto flat = tensor->flat<T>();
  for (size_t i = 0; i < values.size(); ++i) flat(i) = static_cast<T>(values[i]);
}

// half and bfloat16 through float: a value given with float's digits (what
// Python prints for a float16 array cast to float) rounds to the same half.
template <typename T>
void FillThroughFloat(const std::vector<double>& values, tensorflow::Tensor* tensor) {
  auto flat = tensor->flat<T>();
  for (size_t i = 0; i < values.size(); ++i) {
    flat(i) = static_cast<T>(static_cast<float>(values[i]));
  }
}

// The tensor the signature expects, or an error message.
std::string MakeTensor(const Input& input, tensorflow::DataType dtype, tensorflow::Tensor* tensor) {
  tensorflow::TensorShape shape;
  for (int64_t d : input.shape) shape.AddDim(d);
  if (shape.num_elements() != static_cast<int64_t>(input.values.size())) {
    return "input '" + input.key + "' has shape " + shape.DebugString() + " (" +
           std::to_string(shape.num_elements()) + " elements) but " +
           std::to_string(input.values.size()) + " values were given";
  }
  *tensor = tensorflow::Tensor(dtype, shape);
  switch (dtype) {
    case tensorflow::DT_FLOAT:
      Fill<float>(input.values, tensor);
      break;
    case tensorflow::DT_DOUBLE:
      Fill<double>(input.values, tensor);
      break;
    case tensorflow::DT_INT32:
      Fill<int32_t>(input.values, tensor);
      break;
    case tensorflow::DT_INT64:
      Fill<int64_t>(input.values, tensor);
      break;
    case tensorflow::DT_HALF:
      FillThroughFloat<Eigen::half>(input.values, tensor);
      break;
    case tensorflow::DT_BFLOAT16:
      FillThroughFloat<Eigen::bfloat16>(input.values, tensor);
      break;
    default:
      return "input '" + input.key + "' has dtype " + tensorflow::DataTypeString(dtype) +
             "; this runner feeds float, double, half, bfloat16, int32 and "
             "int64";
  }
  return "";
}

template <typename T>
void AppendValues(const tensorflow::Tensor& t, int digits, std::string* out) {
  auto flat = t.flat<T>();
  char buffer[64];
  for (int64_t i = 0; i < flat.size(); ++i) {
    std::snprintf(buffer, sizeof(buffer), "%s%.*g", i ? ", " : "", digits,
                  static_cast<double>(flat(i)));
    *out += buffer;
  }
}

std::string ToJsonLine(const std::string& key, const tensorflow::Tensor& t) {
  std::string line = "{\"output\": \"" + key + "\", \"dtype\": \"" +
                     tensorflow::DataTypeString(t.dtype()) + "\", \"shape\": [";
  for (int i = 0; i < t.dims(); ++i) {
    line += (i ? ", " : "") + std::to_string(t.dim_size(i));
  }
  line += "], \"values\": [";
  // max_digits10: printed values parse back to the identical float/double.
  switch (t.dtype()) {
    case tensorflow::DT_FLOAT:
      AppendValues<float>(t, std::numeric_limits<float>::max_digits10, &line);
      break;
    case tensorflow::DT_DOUBLE:
      AppendValues<double>(t, std::numeric_limits<double>::max_digits10, &line);
      break;
    case tensorflow::DT_HALF:  // exact in float, so float's digits round-trip
      AppendValues<Eigen::half>(t, std::numeric_limits<float>::max_digits10, &line);
      break;
    case tensorflow::DT_BFLOAT16:
      AppendValues<Eigen::bfloat16>(t, std::numeric_limits<float>::max_digits10, &line);
      break;
    case tensorflow::DT_INT32:
      AppendValues<int32_t>(t, 10, &line);
      break;
    case tensorflow::DT_INT64:
      AppendValues<int64_t>(t, 19, &line);
      break;
    default:
      line += "null";  // dtype still reported; values not printable here
  }
  return line + "]}";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> libraries;
  std::string signature_name = "serving_default";
  std::string export_dir;
  std::vector<Input> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--library" && i + 1 < argc) {
      libraries.emplace_back(argv[++i]);
    } else if (arg == "--signature" && i + 1 < argc) {
      signature_name = argv[++i];
    } else if (arg.rfind("--", 0) == 0) {
      return Usage("unknown or incomplete option " + arg);
    } else if (export_dir.empty()) {
      export_dir = arg;
    } else {
      Input input;
      if (!ParseInput(arg, &input)) {
        return Usage("cannot parse input '" + arg + "' (want KEY=DIM,...:VALUE,...)");
      }
      inputs.push_back(std::move(input));
    }
  }
  if (export_dir.empty()) return Usage("no EXPORT_DIR given");

  // Registers the library's ops and kernels in the process-wide registries
  // before the graph is imported, as `import grad_reverse` does in Python.
  for (const std::string& path : libraries) {
    TF_Status* status = TF_NewStatus();
    TF_Library* library = TF_LoadLibrary(path.c_str(), status);
    if (TF_GetCode(status) != TF_OK) {
      std::fprintf(stderr, "saved_model_runner: cannot load op library %s: %s\n", path.c_str(),
                   TF_Message(status));
      TF_DeleteStatus(status);
      return kLibraryFailed;
    }
    TF_DeleteStatus(status);
    (void)library;  // kept loaded: its kernels must outlive the session
  }

  tensorflow::SavedModelBundle bundle;
  absl::Status status = tensorflow::LoadSavedModel(
      tensorflow::SessionOptions(), tensorflow::RunOptions(), export_dir, {"serve"}, &bundle);
  if (!status.ok()) {
    std::fprintf(stderr, "saved_model_runner: LoadSavedModel failed: %s\n",
                 status.ToString().c_str());
    return kLoadFailed;
  }

  const auto& signatures = bundle.GetSignatures();
  const auto found = signatures.find(signature_name);
  if (found == signatures.end()) {
    std::string names;
    for (const auto& entry : signatures) names += " " + entry.first;
    return Usage("no signature '" + signature_name + "'; the SavedModel has:" + names);
  }
  const tensorflow::SignatureDef& signature = found->second;

  std::vector<std::pair<std::string, tensorflow::Tensor>> feeds;
  for (const Input& input : inputs) {
    const auto info = signature.inputs().find(input.key);
    if (info == signature.inputs().end()) {
      std::string keys;
      for (const auto& entry : signature.inputs()) keys += " " + entry.first;
      return Usage("signature '" + signature_name + "' has no input '" + input.key +
                   "'; its inputs:" + keys);
    }
    tensorflow::Tensor tensor;
    const std::string error = MakeTensor(input, info->second.dtype(), &tensor);
    if (!error.empty()) return Usage(error);
    feeds.emplace_back(info->second.name(), std::move(tensor));
  }
  if (feeds.size() != static_cast<size_t>(signature.inputs().size())) {
    return Usage("signature '" + signature_name + "' takes " +
                 std::to_string(signature.inputs().size()) + " inputs, " +
                 std::to_string(feeds.size()) + " given");
  }

  // protobuf::Map iterates in no fixed order; print outputs sorted by key.
  const std::map<std::string, tensorflow::TensorInfo> outputs(signature.outputs().begin(),
                                                              signature.outputs().end());
  std::vector<std::string> fetch_names;
  for (const auto& entry : outputs) fetch_names.push_back(entry.second.name());
  std::vector<tensorflow::Tensor> results;
  status = bundle.session->Run(feeds, fetch_names, {}, &results);
  if (!status.ok()) {
    std::fprintf(stderr, "saved_model_runner: Session::Run failed: %s\n",
                 status.ToString().c_str());
    return kRunFailed;
  }
  size_t i = 0;
  for (const auto& entry : outputs) {
    std::printf("%s\n", ToJsonLine(entry.first, results[i++]).c_str());
  }
  return 0;
}
