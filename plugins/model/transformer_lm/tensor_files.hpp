// Test helper: tensors exchanged with tests/reference/*.py as a folder of raw
// little-endian files plus index.txt ("<name> <dtype> <d0,d1,...|->" per line);
// tests/reference/tensor_files.py is the Python side.
#pragma once
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

namespace plugins::transformer_lm::testing {

inline std::string dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat: return "float32";
    case torch::kDouble: return "float64";
    case torch::kLong: return "int64";
    default: throw std::invalid_argument(std::string("tensor_files: unsupported dtype ") + c10::toString(t));
  }
}

inline torch::ScalarType dtype_from_name(const std::string& name) {
  if (name == "float32") return torch::kFloat;
  if (name == "float64") return torch::kDouble;
  if (name == "int64") return torch::kLong;
  throw std::invalid_argument("tensor_files: unsupported dtype " + name);
}

inline void write_tensors(const std::filesystem::path& dir, const std::map<std::string, torch::Tensor>& tensors) {
  std::filesystem::create_directories(dir);
  std::ofstream index(dir / "index.txt");
  for (const auto& [name, tensor] : tensors) {
    const torch::Tensor t = tensor.detach().cpu().contiguous();
    std::string shape;
    for (std::int64_t d : t.sizes()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    index << name << ' ' << dtype_name(t.scalar_type()) << ' ' << (shape.empty() ? "-" : shape) << '\n';
    std::ofstream file(dir / (name + ".bin"), std::ios::binary);
    file.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  }
}

inline std::map<std::string, torch::Tensor> read_tensors(const std::filesystem::path& dir) {
  std::ifstream index(dir / "index.txt");
  if (!index) throw std::runtime_error("tensor_files: cannot read " + (dir / "index.txt").string());
  std::map<std::string, torch::Tensor> tensors;
  std::string name, dtype, shape;
  while (index >> name >> dtype >> shape) {
    std::vector<std::int64_t> sizes;
    if (shape != "-") {
      std::stringstream dims(shape);
      for (std::string d; std::getline(dims, d, ',');) sizes.push_back(std::stoll(d));
    }
    torch::Tensor t = torch::empty(sizes, dtype_from_name(dtype));
    std::ifstream file(dir / (name + ".bin"), std::ios::binary);
    file.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    if (!file) throw std::runtime_error("tensor_files: short read of " + name);
    tensors[name] = t;
  }
  return tensors;
}

// Deletes `dir` and everything under it. Not std::filesystem::remove_all: the
// PyPI libtorch.so exports its own copy of that symbol, which the linker prefers
// and which crashes (null call) when it walks a directory.
inline void remove_tree(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> entries;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) entries.push_back(entry.path());
  for (const auto& entry : entries) {
    if (std::filesystem::is_directory(entry)) remove_tree(entry);
    else std::remove(entry.c_str());
  }
  std::remove(dir.c_str());
}

}  // namespace plugins::transformer_lm::testing
