#include "error_shape.hpp"

#include <nlohmann/json.hpp>

namespace memra::server::testing {

::testing::AssertionResult is_openai_error(const std::string& content_type, const std::string& body,
                                           const std::string& code, const std::string& param) {
  if (content_type.rfind("application/json", 0) != 0) {
    return ::testing::AssertionFailure() << "Content-Type is '" << content_type << "', body: " << body;
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(body);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "body is not JSON (" << e.what() << "): " << body;
  }
  if (!doc.is_object() || !doc.contains("error") || !doc["error"].is_object()) {
    return ::testing::AssertionFailure() << "no \"error\" object: " << body;
  }
  const auto& e = doc["error"];
  if (!e.contains("message") || !e["message"].is_string() || e["message"].get<std::string>().empty()) {
    return ::testing::AssertionFailure() << "error.message missing or empty: " << body;
  }
  if (!e.contains("type") || !e["type"].is_string() || e["type"].get<std::string>().empty()) {
    return ::testing::AssertionFailure() << "error.type missing: " << body;
  }
  if (!e.contains("code") || e["code"] != code) {
    return ::testing::AssertionFailure() << "error.code is not '" << code << "': " << body;
  }
  if (!e.contains("param")) return ::testing::AssertionFailure() << "error.param missing: " << body;
  if (param.empty() ? !e["param"].is_null() : e["param"] != param) {
    return ::testing::AssertionFailure() << "error.param is not " << (param.empty() ? "null" : param) << ": "
                                         << body;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult is_any_openai_error(const std::string& content_type, const std::string& body) {
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("error") || !doc["error"].is_object()) {
    return ::testing::AssertionFailure() << "no \"error\" object: " << body;
  }
  const auto& e = doc["error"];
  if (!e.contains("code") || !e["code"].is_string() || e["code"].get<std::string>().empty()) {
    return ::testing::AssertionFailure() << "error.code missing: " << body;
  }
  const std::string code = e["code"];
  const std::string param = e.contains("param") && e["param"].is_string() ? e["param"].get<std::string>() : "";
  return is_openai_error(content_type, body, code, param);
}

::testing::AssertionResult is_anthropic_error(const std::string& content_type, const std::string& body,
                                              const std::string& type) {
  if (content_type.rfind("application/json", 0) != 0) {
    return ::testing::AssertionFailure() << "Content-Type is '" << content_type << "', body: " << body;
  }
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.size() != 3 || doc.value("type", "") != "error" ||
      !doc.contains("error") || !doc["error"].is_object() || !doc.contains("request_id") ||
      !(doc["request_id"].is_string() || doc["request_id"].is_null())) {
    return ::testing::AssertionFailure() << "not {\"type\":\"error\",\"error\":{...},\"request_id\":...}: " << body;
  }
  const auto& e = doc["error"];
  if (!e.contains("type") || !e["type"].is_string() || e["type"].get<std::string>().empty() ||
      (!type.empty() && e["type"] != type)) {
    return ::testing::AssertionFailure() << "error.type is not " << (type.empty() ? "a string" : type) << ": " << body;
  }
  if (!e.contains("message") || !e["message"].is_string() || e["message"].get<std::string>().empty()) {
    return ::testing::AssertionFailure() << "error.message missing or empty: " << body;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace memra::server::testing
