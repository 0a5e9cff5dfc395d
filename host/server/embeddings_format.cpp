#include "host/server/embeddings_format.hpp"

#include <Poco/Base64Encoder.h>

#include <bit>
#include <sstream>

#include <nlohmann/json.hpp>

namespace memra::server {

std::string float32_base64(std::span<const float> values) {
  std::string bytes;
  bytes.reserve(values.size() * 4);
  for (float v : values) {
    const auto bits = std::bit_cast<std::uint32_t>(v);
    for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((bits >> (8 * b)) & 0xffu));  // little-endian
  }
  std::ostringstream out;
  Poco::Base64Encoder encoder(out);
  encoder.rdbuf()->setLineLength(0);  // one line, as OpenAI sends it
  encoder << bytes;
  encoder.close();
  return out.str();
}

std::string embeddings_body(const std::string& model, const std::vector<std::vector<float>>& vectors, bool base64,
                            std::int64_t prompt_tokens) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < vectors.size(); ++i) {
    nlohmann::ordered_json item = {{"object", "embedding"}, {"index", i}};
    if (base64) item["embedding"] = float32_base64(vectors[i]);
    else item["embedding"] = vectors[i];
    data.push_back(std::move(item));
  }
  const nlohmann::ordered_json body = {{"object", "list"},
                                       {"data", std::move(data)},
                                       {"model", model},
                                       {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return body.dump();
}

}  // namespace memra::server
