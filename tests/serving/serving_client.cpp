#include "serving_client.hpp"

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/String.h>

#include <istream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace memra::server::testing {

SseResult sse_post(int port, const std::string& path, const std::string& body, const std::string& bearer,
                   const std::function<bool(const std::string&)>& on_event, int timeout_ms) {
  Poco::Net::HTTPClientSession session("127.0.0.1", static_cast<Poco::UInt16>(port));
  session.setTimeout(Poco::Timespan(static_cast<long>(timeout_ms) * 1000));
  Poco::Net::HTTPRequest req("POST", path, Poco::Net::HTTPMessage::HTTP_1_1);
  req.setContentType("application/json");
  if (!bearer.empty()) req.set("Authorization", "Bearer " + bearer);
  req.setContentLength64(static_cast<Poco::Int64>(body.size()));
  session.sendRequest(req) << body;
  Poco::Net::HTTPResponse res;
  std::istream& in = session.receiveResponse(res);
  SseResult out;
  out.status = static_cast<int>(res.getStatus());
  out.content_type = res.getContentType();
  for (const auto& [name, value] : res) out.headers[Poco::toLower(name)] = value;
  if (out.status != 200 || out.content_type.rfind("text/event-stream", 0) != 0) {
    Poco::StreamCopier::copyToString(in, out.body);
    return out;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;  // blank separators
    const std::string data = line.substr(6);
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    out.events.push_back(data);
    if (on_event && !on_event(data)) {
      session.abort();  // hang up: close the socket without reading further
      out.hung_up = true;
      return out;
    }
  }
  return out;
}

namespace {

std::map<std::string, std::string> parse_labels(const std::string& text) {
  static const std::regex kLabel(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)\",?)");
  std::map<std::string, std::string> labels;
  for (std::sregex_iterator it(text.begin(), text.end(), kLabel), end; it != end; ++it) labels[(*it)[1]] = (*it)[2];
  return labels;
}

template <typename F>
void for_samples(const std::string& exposition, const std::string& name, const std::map<std::string, std::string>& want,
                 F&& f) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto brace = line.find('{');
    const auto space = line.rfind(' ');
    const std::string metric = line.substr(0, std::min(brace, space));
    if (metric != name) continue;
    std::map<std::string, std::string> labels;
    if (brace != std::string::npos) labels = parse_labels(line.substr(brace + 1, line.rfind('}') - brace - 1));
    bool match = true;
    for (const auto& [k, v] : want) {
      auto it = labels.find(k);
      match = match && it != labels.end() && it->second == v;
    }
    if (match) f(std::stod(line.substr(space + 1)));
  }
}

}  // namespace

std::optional<double> sample(const std::string& exposition, const std::string& name,
                             const std::map<std::string, std::string>& labels) {
  std::optional<double> out;
  for_samples(exposition, name, labels, [&](double v) { out = v; });
  return out;
}

double sample_sum(const std::string& exposition, const std::string& name,
                  const std::map<std::string, std::string>& labels) {
  double sum = 0;
  for_samples(exposition, name, labels, [&](double v) { sum += v; });
  return sum;
}

std::string scrape(int port, const std::string& bearer) { return http(port, get("/metrics", bearer)).body; }

std::string default_model_dir() { return std::string(MEMRA_BINARY_ROOT) + "/share/memra/default_model"; }

HeldStream::HeldStream(int port, const std::string& chat_body, const std::string& bearer) {
  nlohmann::json body = nlohmann::json::parse(chat_body);
  body["stream"] = true;
  body["ignore_eos"] = true;
  result_ = std::async(std::launch::async, [this, port, text = body.dump(), bearer] {
    return sse_post(port, "/v1/chat/completions", text, bearer, [this](const std::string& data) {
      if (data.find("\"content\":\"\"") != std::string::npos) return true;  // the role chunk
      std::unique_lock<std::mutex> lock(mu_);
      started_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_; });
      return false;
    });
  });
}

bool HeldStream::wait_started(std::chrono::milliseconds within) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, within, [this] { return started_; });
}

SseResult HeldStream::release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
  }
  cv_.notify_all();
  if (result_.valid()) return result_.get();
  return {};
}

}  // namespace memra::server::testing
