// The KV format registry: names and order, bytes per head-token against the KV_FORMATS.md
// table at D = 64, 128, 256, plane layouts that add up to the row bytes, lookup errors.
#include <gtest/gtest.h>

#include <array>
#include <map>

#include "core/error.h"
#include "kv/format.h"

namespace ninfer {
namespace {

TEST(KvFormatRegistry, NamesInTableOrder) {
  std::vector<std::string> names;
  for (const KvFormat* f : kv_formats()) names.emplace_back(f->name);
  EXPECT_EQ(names, (std::vector<std::string>{"f32", "bf16", "int8", "fp8", "nvfp4", "k8v4", "int4",
                                             "rk4v4-e8", "rk2v4-e8", "e8-root-ref", "iq4nl-ref"}));
}

TEST(KvFormatRegistry, BytesPerHeadTokenMatchKvFormatsTable) {
  // From KV_FORMATS.md (D=256 and D=128 columns); D=64 follows the same per-value rules.
  const std::map<std::string, std::array<size_t, 3>> want = {
      // name          D=64  D=128 D=256
      {"f32", {512, 1024, 2048}},  {"bf16", {256, 512, 1024}}, {"int8", {132, 264, 528}},
      {"fp8", {132, 260, 516}},    {"nvfp4", {72, 144, 288}},  {"k8v4", {102, 202, 402}},
      {"int4", {68, 136, 272}},    {"rk4v4-e8", {68, 136, 272}}, {"rk2v4-e8", {52, 104, 208}},
      {"e8-root-ref", {52, 104, 208}}, {"iq4nl-ref", {72, 144, 288}}};
  for (const KvFormat* f : kv_formats()) {
    auto it = want.find(std::string(f->name));
    ASSERT_NE(it, want.end()) << f->name;
    const int dims[3] = {64, 128, 256};
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(f->bytes_per_head_token(dims[i]), it->second[i]) << f->name << " D=" << dims[i];
  }
}

TEST(KvFormatRegistry, PlanesAddUpToRowBytes) {
  for (const KvFormat* f : kv_formats()) {
    for (const KvSideCodec* s : {&f->k, &f->v}) {
      ASSERT_FALSE(s->planes.empty()) << f->name;
      for (int d : {64, 128, 192, 256, 512}) {
        if (d % f->head_dim_multiple) continue;
        size_t sum = 0;
        for (const KvPlane& p : s->planes) sum += p.bytes(d);
        EXPECT_EQ(sum, s->bytes(d)) << f->name << " D=" << d;
      }
    }
  }
}

TEST(KvFormatRegistry, CompressedFormatsNeedMultiplesOf64) {
  for (const KvFormat* f : kv_formats()) {
    if (f->name == "f32" || f->name == "bf16") {
      EXPECT_EQ(f->head_dim_multiple, 1);
    } else {
      EXPECT_EQ(f->head_dim_multiple, 64) << f->name;
      EXPECT_THROW(f->check_head_dim(96), Error);
      EXPECT_NO_THROW(f->check_head_dim(128));
      EXPECT_THROW(f->check_head_dim(192), Error) << f->name;  // H_D needs a power of two
      EXPECT_THROW(f->check_head_dim(2048), Error) << f->name;
    }
  }
}

TEST(KvFormatRegistry, RotationsAreTruthful) {
  // K of every compressed format is rotated by H_D; V by H_64 except int8/fp8 (not rotated).
  for (const KvFormat* f : kv_formats()) {
    const std::string n(f->name);
    const bool exact = n == "f32" || n == "bf16";
    EXPECT_EQ(f->k.rotation, exact ? KvRotation::None : KvRotation::HadamardHead) << n;
    const bool v_plain = exact || n == "int8" || n == "fp8";
    EXPECT_EQ(f->v.rotation, v_plain ? KvRotation::None : KvRotation::Hadamard64) << n;
  }
}

TEST(KvFormatRegistry, UnknownNameListsValidOnes) {
  try {
    find_kv_format("rk3");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rk4v4-e8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(find_kv_format("rk2v4-e8").name, "rk2v4-e8");
}

}  // namespace
}  // namespace ninfer
