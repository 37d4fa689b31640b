// Shared pieces of the fuzz targets: splitting an input into NUL-separated parts and a
// per-process scratch directory for the loaders that read files.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer_fuzz {

// The input's parts between NUL bytes, at most `max_parts` (the last part keeps any further
// NULs). Inputs without a NUL are one part.
inline std::vector<std::string_view> split_nul(const uint8_t* data, size_t size, size_t max_parts) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    size_t z = s.find('\0');
    if (z == std::string_view::npos) break;
    parts.push_back(s.substr(0, z));
    s.remove_prefix(z + 1);
  }
  parts.push_back(s);
  return parts;
}

// A directory private to this process (under TMPDIR, /dev/shm when it exists: no disk I/O).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("ninfer-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::filesystem::path write_scratch(const std::string& name, std::string_view bytes) {
  std::filesystem::path p = scratch_dir() / name;
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f) std::abort();
  return p;
}

}  // namespace ninfer_fuzz
