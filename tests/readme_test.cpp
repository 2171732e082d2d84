// The README shows examples/quickstart.cpp verbatim (that file is compiled
// and run with the project, so the README's example compiles), and the API
// page it cites is in the repository.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Readme, ShowsTheCompiledQuickstartVerbatim) {
  const std::string readme = slurp(DLOCK_SOURCE_DIR "/README.md");
  const std::string example = slurp(DLOCK_SOURCE_DIR "/examples/quickstart.cpp");
  ASSERT_FALSE(example.empty());
  EXPECT_NE(readme.find("```cpp\n" + example + "```"), std::string::npos)
      << "README.md's example differs from examples/quickstart.cpp";
}

TEST(Readme, CitesOnlyDocumentsInTheRepository) {
  const std::string readme = slurp(DLOCK_SOURCE_DIR "/README.md");
  EXPECT_EQ(readme.find("../shared"), std::string::npos);
  EXPECT_NE(readme.find("docs/api.md"), std::string::npos);
  EXPECT_FALSE(slurp(DLOCK_SOURCE_DIR "/docs/api.md").empty());
  EXPECT_FALSE(slurp(DLOCK_SOURCE_DIR "/LICENSE").empty());
  EXPECT_NE(readme.find("SPDX-License-Identifier: MIT"), std::string::npos);
}

}  // namespace
