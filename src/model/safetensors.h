// Memory-mapped safetensors reader, single file or sharded through
// model.safetensors.index.json. File layout: u64 little-endian header length N, N bytes of
// JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the
// data section; offsets are relative to the data section. Every header entry is validated
// (dtype known, offsets in bounds and ordered, size == prod(shape) * dtype size).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ninfer {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // points into the mapped file
  size_t nbytes = 0;
  std::string file;  // shard file name, for error messages

  int64_t numel() const;
  std::string shape_str() const;  // "[512, 2048]"
};

// Parses one safetensors file image `data` [size] (the header and its tensor table, every
// entry checked against the data section); each TensorInfo's data points into `data`.
// `path` names the file in errors.
std::vector<TensorInfo> parse_safetensors(const uint8_t* data, size_t size, const std::string& path);

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class TensorStore {
 public:
  // Opens <dir>/model.safetensors, or the shards named by <dir>/model.safetensors.index.json.
  static std::unique_ptr<TensorStore> open(const std::filesystem::path& dir);
  // Opens one safetensors file (tests, tools).
  static std::unique_ptr<TensorStore> open_file(const std::filesystem::path& file);

  // Adds a tensor whose bytes this store owns (random weights made in memory); t.nbytes and
  // t.data are set from `data` (numel x dtype size bytes).
  void add_owned(TensorInfo t, std::unique_ptr<uint8_t[]> data);

  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  size_t total_bytes() const;

 private:
  void add_file(const std::filesystem::path& path);
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace ninfer
