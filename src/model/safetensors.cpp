#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "model/config.h"

namespace ninfer {

using nlohmann::json;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

MappedFile::MappedFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open {}: {}", path.string(), std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat {}", path.string());
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail("cannot mmap {}: {}", path.string(), std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

std::vector<TensorInfo> parse_safetensors(const uint8_t* data, size_t size, const std::string& path) {
  const std::string fname = std::filesystem::path(path).filename().string();
  if (size < 8) fail("{}: truncated file ({} bytes, no safetensors header)", path, size);
  uint64_t hlen;
  std::memcpy(&hlen, data, 8);
  if (hlen > size - 8) {
    fail("{}: header length {} runs past the end of the file ({} bytes): truncated or not a "
         "safetensors file",
         path, hlen, size);
  }
  json h;
  try {
    h = json::parse(data + 8, data + 8 + hlen);
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number past double range
    fail("{}: invalid safetensors JSON header: {}", path, e.what());
  }
  if (!h.is_object()) fail("{}: safetensors header is not a JSON object", path);
  const uint8_t* base = data + 8 + hlen;
  const size_t data_size = size - 8 - hlen;
  std::vector<TensorInfo> out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const json& e = it.value();
    const std::string& name = it.key();
    TensorInfo t;
    t.name = name;
    t.file = fname;
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2) {
      fail("{}: tensor '{}': header entry needs dtype, shape and data_offsets[2]", path, name);
    }
    std::string dt = e["dtype"].get<std::string>();
    if (!parse_safetensors_dtype(dt, &t.dtype))
      fail("{}: tensor '{}': unsupported dtype '{}'", path, name, dt);
    for (const json& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("{}: tensor '{}': bad shape {}", path, name, e["shape"].dump());
      t.shape.push_back(d.get<int64_t>());
    }
    const json& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("{}: tensor '{}': data_offsets must be non-negative integers", path, name);
    uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > data_size) {
      fail("{}: tensor '{}': data_offsets [{}, {}] lie outside the data section ({} bytes): file "
           "truncated or header corrupt",
           path, name, b, en, data_size);
    }
    // NOTE: the byte count is computed with overflow checks: a shape whose product wraps
    // around (e.g. [2^32, 2^32] of F32 is 0 mod 2^64) would otherwise pass with 0 bytes.
    uint64_t want = dtype_size(t.dtype);
    bool wraps = false;
    for (int64_t d : t.shape) wraps = wraps || __builtin_mul_overflow(want, uint64_t(d), &want);
    if (wraps || want > uint64_t(INT64_MAX))
      fail("{}: tensor '{}': shape {} of {} has more bytes than any file can hold", path, name, t.shape_str(), dt);
    if (en - b != want) {
      fail("{}: tensor '{}': data_offsets span {} bytes but shape {} of {} needs {}", path,
           name, en - b, t.shape_str(), dt, want);
    }
    t.data = base + b;
    t.nbytes = size_t(want);
    out.push_back(std::move(t));
  }
  return out;
}

void TensorStore::add_file(const std::filesystem::path& path) {
  auto mf = std::make_unique<MappedFile>(path);
  for (TensorInfo& t : parse_safetensors(mf->data(), mf->size(), path.string())) {
    if (tensors_.count(t.name)) fail("{}: tensor '{}' appears in more than one file", path.string(), t.name);
    std::string name = t.name;
    tensors_.emplace(std::move(name), std::move(t));
  }
  files_.push_back(std::move(mf));
}

std::unique_ptr<TensorStore> TensorStore::open_file(const std::filesystem::path& file) {
  auto s = std::unique_ptr<TensorStore>(new TensorStore());
  s->add_file(file);
  return s;
}

std::unique_ptr<TensorStore> TensorStore::open(const std::filesystem::path& dir) {
  auto s = std::unique_ptr<TensorStore>(new TensorStore());
  std::filesystem::path index = dir / "model.safetensors.index.json";
  std::filesystem::path single = dir / "model.safetensors";
  if (std::filesystem::exists(index)) {
    json j;
    try {
      j = json::parse(read_file(index));
    } catch (const json::exception& e) {  // parse_error, or out_of_range: a number past double range
      fail("{}: invalid JSON: {}", index.string(), e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      fail("{}: missing object 'weight_map'", index.string());
    std::set<std::string> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) fail("{}: weight_map['{}'] must be a file name", index.string(), it.key());
      shards.insert(it.value().get<std::string>());
    }
    for (const std::string& sh : shards) {
      if (sh.find('/') != std::string::npos || sh.find("..") != std::string::npos)
        fail("{}: shard name '{}' must be a plain file name", index.string(), sh);
      if (!std::filesystem::exists(dir / sh))
        fail("{}: shard '{}' listed in the index is missing", index.string(), sh);
      s->add_file(dir / sh);
    }
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      const TensorInfo* t = s->find(it.key());
      if (!t) fail("{}: tensor '{}' is not in shard '{}'", index.string(), it.key(), it.value().get<std::string>());
      if (t->file != it.value().get<std::string>())
        fail("{}: tensor '{}' is in shard '{}', not '{}' as the index says", index.string(), it.key(),
             t->file, it.value().get<std::string>());
    }
  } else if (std::filesystem::exists(single)) {
    s->add_file(single);
  } else {
    fail("{}: no model.safetensors or model.safetensors.index.json found", dir.string());
  }
  return s;
}

void TensorStore::add_owned(TensorInfo t, std::unique_ptr<uint8_t[]> data) {
  t.nbytes = size_t(t.numel()) * dtype_size(t.dtype);
  t.data = data.get();
  owned_.push_back(std::move(data));
  const std::string name = t.name;
  tensors_[name] = std::move(t);
}

const TensorInfo* TensorStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

size_t TensorStore::total_bytes() const {
  size_t n = 0;
  for (const auto& [k, t] : tensors_) n += t.nbytes;
  return n;
}

}  // namespace ninfer
