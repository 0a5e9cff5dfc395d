// Both languages saw the same ABI: the strict C and C++ TUs static_assert the
// written-down layout; here their actual layouts are compared entry by entry.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "abi_layout_c.h"
#include "abi_layout_cxx.hpp"
#include "memra/memra.h"

namespace memra::sdk_test {
namespace {

TEST(SdkLayout, CAndCxxAgreeOnEveryStructAndField) {
  std::vector<LayoutEntry> cxx = cxx_layout();
  ASSERT_EQ(memra_test_c_layout_count(), cxx.size());
  for (size_t i = 0; i < cxx.size(); ++i) {
    const memra_c_layout_entry* c = memra_test_c_layout(i);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(cxx[i].type, c->type);
    EXPECT_EQ(cxx[i].what, c->what);
    EXPECT_EQ(cxx[i].value, c->value) << cxx[i].type << "." << cxx[i].what;
  }
}

TEST(SdkLayout, TableCoversEveryStructTypedefInTheHeaders) {
  // Every `typedef struct X {` in sdk/include/memra must appear in the layout table,
  // so a new public struct cannot ship without a layout check.
  std::set<std::string> checked;
  for (const LayoutEntry& e : cxx_layout()) checked.insert(e.type);
  size_t headers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MEMRA_SOURCE_ROOT) + "/sdk/include/memra")) {
    if (entry.path().extension() != ".h") continue;
    ++headers;
    std::string path = entry.path().string();
    std::string header = entry.path().filename().string();
    FILE* f = std::fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr) << path;
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      char name[128];
      if (std::sscanf(line, "typedef struct %127s {", name) == 1 && std::strchr(line, '{') != nullptr) {
        EXPECT_TRUE(checked.contains(name)) << name << " (" << header << ") has no layout entry";
      }
    }
    std::fclose(f);
  }
  EXPECT_GE(headers, 7u);
}

TEST(SdkLayout, StatusNamesAreTheSameFromC) {
  for (memra_status s = MEMRA_OK; s <= MEMRA_ERR_CANCELLED + 1; ++s) {
    EXPECT_STREQ(memra_test_c_status_name(s), memra_status_name(s));
  }
  EXPECT_STREQ(memra_status_name(MEMRA_ERR_UNSUPPORTED), "UNSUPPORTED");
  EXPECT_STREQ(memra_status_name(12345), "UNKNOWN");
}

TEST(SdkLayout, StructHasChecksTheCoveredSize) {
  memra_device_info d{};
  d.struct_size = MEMRA_STRUCT_SIZE(memra_device_info, total_memory_bytes);
  EXPECT_TRUE(MEMRA_STRUCT_HAS(&d, memra_device_info, total_memory_bytes));
  EXPECT_FALSE(MEMRA_STRUCT_HAS(&d, memra_device_info, arch));
  const memra_device_info* none = nullptr;
  EXPECT_FALSE(MEMRA_STRUCT_HAS(none, memra_device_info, backend));
}

}  // namespace
}  // namespace memra::sdk_test
