#include "tests/repack/test_util.hpp"

#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>

namespace memra::testing {

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const std::filesystem::path& p, const std::vector<uint8_t>& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

std::string sha256_hex(const void* data, size_t n) {
  Poco::SHA2Engine engine(Poco::SHA2Engine::SHA_256);
  engine.update(data, static_cast<unsigned>(n));
  return Poco::DigestEngine::digestToHex(engine.digest());
}

std::vector<std::string> fixture_models() {
  std::vector<std::string> out;
  if (!fixtures_present()) return out;
  for (const auto& e : std::filesystem::directory_iterator(fixtures_dir() / "models"))
    if (e.is_directory()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace memra::testing
