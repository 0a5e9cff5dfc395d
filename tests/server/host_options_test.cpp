#include "host/server/host_options.hpp"

#include <gtest/gtest.h>

#include <map>

#include "tests/server/env_of.hpp"

namespace memra::server {
namespace {

using test_support::env_of;

TEST(ServerOptions, Defaults) {
  HostOptions o;
  ASSERT_TRUE(apply_environment(o, env_of({})));
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 8080);
  EXPECT_EQ(o.max_body_bytes, 8u << 20);
  EXPECT_EQ(o.drain_timeout_ms, 30000);
  EXPECT_TRUE(o.api_keys_file.empty());
  EXPECT_TRUE(o.models.empty());
  EXPECT_FALSE(o.enable_test_routes);
  EXPECT_EQ(o.threads, 0);  // auto: sized from the schedulers at start
  EXPECT_EQ(o.header_timeout_ms, 10000);
  EXPECT_EQ(o.body_timeout_ms, 60000);
  EXPECT_EQ(o.min_receive_rate, 1024);
  EXPECT_EQ(o.max_connections, 4096);
  EXPECT_EQ(o.max_client_connections, 256);
  EXPECT_EQ(o.backend, BackendChoice::auto_select);
  EXPECT_FALSE(o.allow_generic);
  EXPECT_EQ(o.max_context, 0);
  EXPECT_EQ(o.kv_cache_tokens, 0);
  EXPECT_EQ(o.max_running, 16);
  EXPECT_EQ(o.max_waiting, 256);
  EXPECT_EQ(o.max_step_tokens, 512);
  EXPECT_EQ(o.tenant_queue, 64);
}

TEST(ServerOptions, EngineKnobs) {
  HostOptions o;
  ASSERT_TRUE(apply_environment(o, env_of({{"MEMRA_BACKEND", "cpu"},
                                           {"MEMRA_MAX_CONTEXT", "512"},
                                           {"MEMRA_KV_CACHE_TOKENS", "4096"},
                                           {"MEMRA_MAX_RUNNING", "8"},
                                           {"MEMRA_MAX_WAITING", "32"},
                                           {"MEMRA_MAX_STEP_TOKENS", "64"},
                                           {"MEMRA_TENANT_QUEUE", "3"}})));
  EXPECT_EQ(o.backend, BackendChoice::cpu);
  EXPECT_EQ(o.max_context, 512);
  EXPECT_EQ(o.kv_cache_tokens, 4096);
  EXPECT_EQ(o.max_running, 8);
  EXPECT_EQ(o.max_waiting, 32);
  EXPECT_EQ(o.max_step_tokens, 64);
  EXPECT_EQ(o.tenant_queue, 3);
  ASSERT_TRUE(apply_flag(o, "backend", "cuda"));
  EXPECT_EQ(o.backend, BackendChoice::cuda);
  ASSERT_TRUE(apply_flag(o, "allow-generic", ""));
  EXPECT_TRUE(o.allow_generic);
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"backend", "tpu"}, {"max-running", "0"}, {"max-waiting", "0"}, {"max-step-tokens", "0"},
           {"max-context", "-1"}, {"kv-cache-tokens", "x"}, {"tenant-queue", "-2"}}) {
    HostOptions bad;
    auto s = apply_flag(bad, flag, value);
    ASSERT_FALSE(s) << flag << "=" << value;
    EXPECT_NE(s.error().message.find("--" + flag), std::string::npos) << s.error().message;
  }
}

TEST(ServerOptions, KvDtype) {
  HostOptions o;
  ASSERT_TRUE(apply_environment(o, env_of({})));
  EXPECT_EQ(o.kv_dtype, MEMRA_DTYPE_F16);
  ASSERT_TRUE(apply_environment(o, env_of({{"MEMRA_KV_DTYPE", "bf16"}})));
  EXPECT_EQ(o.kv_dtype, MEMRA_DTYPE_BF16);
  ASSERT_TRUE(apply_flag(o, "kv-dtype", "f32"));
  EXPECT_EQ(o.kv_dtype, MEMRA_DTYPE_F32);
  ASSERT_TRUE(apply_flag(o, "kv-dtype", "fp8"));
  EXPECT_EQ(o.kv_dtype, MEMRA_DTYPE_F8_E4M3);
  ASSERT_TRUE(apply_flag(o, "kv-dtype", "f16"));
  EXPECT_EQ(o.kv_dtype, MEMRA_DTYPE_F16);
  for (const char* bad : {"fp16", "half", "BF16", "e4m3", ""}) {
    HostOptions b;
    auto s = apply_flag(b, "kv-dtype", bad);
    ASSERT_FALSE(s) << bad;
    EXPECT_NE(s.error().message.find("--kv-dtype must be f16, bf16, fp8 or f32"), std::string::npos) << s.error().message;
  }
}

TEST(ServerOptions, EnvironmentThenFlagsWin) {
  HostOptions o;
  ASSERT_TRUE(apply_environment(o, env_of({{"MEMRA_HOST", "0.0.0.0"},
                                           {"MEMRA_PORT", "9000"},
                                           {"MEMRA_API_KEYS", "/etc/keys.json"},
                                           {"MEMRA_MODELS", "a=/m/a,b=/m/b"},
                                           {"MEMRA_MAX_BODY_BYTES", "1024"},
                                           {"MEMRA_DRAIN_TIMEOUT_MS", "5"},
                                           {"MEMRA_THREADS", "4"},
                                           {"MEMRA_LOG_LEVEL", "info"},
                                           {"MEMRA_REGISTRY", "/r.db"}})));
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 9000);
  EXPECT_EQ(o.api_keys_file, "/etc/keys.json");
  ASSERT_EQ(o.models.size(), 2u);
  EXPECT_EQ(o.models[1].alias, "b");
  EXPECT_EQ(o.max_body_bytes, 1024u);
  EXPECT_EQ(o.drain_timeout_ms, 5);
  EXPECT_EQ(o.threads, 4);
  EXPECT_EQ(o.log_level, "information");
  EXPECT_EQ(o.registry_path, "/r.db");

  ASSERT_TRUE(apply_flag(o, "port", "0"));
  ASSERT_TRUE(apply_flag(o, "model", "c=/m/c"));
  EXPECT_EQ(o.port, 0);
  ASSERT_EQ(o.models.size(), 1u);  // --model replaces MEMRA_MODELS
  EXPECT_EQ(o.models[0].alias, "c");
  ASSERT_TRUE(apply_flag(o, "model", "/models/llama-3.2-1b.memra"));
  ASSERT_EQ(o.models.size(), 2u);
  EXPECT_EQ(o.models[1].alias, "llama-3.2-1b");
}

TEST(ServerOptions, BadValuesNameTheirSource) {
  struct Case {
    std::string flag, value, expected;
  };
  for (const auto& c : std::vector<Case>{{"port", "65536", "--port must be an integer from 0 to 65535"},
                                         {"port", "80x", "--port"},
                                         {"port", "", "--port"},
                                         {"max-body-bytes", "0", "--max-body-bytes"},
                                         {"drain-timeout-ms", "-1", "--drain-timeout-ms"},
                                         {"threads", "1", "--threads"},
                                         {"header-timeout-ms", "50", "--header-timeout-ms"},
                                         {"body-timeout-ms", "x", "--body-timeout-ms"},
                                         {"min-receive-rate", "-1", "--min-receive-rate"},
                                         {"max-connections", "8", "--max-connections"},
                                         {"max-client-connections", "-2", "--max-client-connections"},
                                         {"log-level", "loud", "unknown log level 'loud'"},
                                         {"host", "", "--host must not be empty"},
                                         {"model", "=/x", "alias before '=' is empty"},
                                         {"model", "a=", "the path is empty"}}) {
    HostOptions o;
    auto s = apply_flag(o, c.flag, c.value);
    ASSERT_FALSE(s) << c.flag << "=" << c.value;
    EXPECT_NE(s.error().message.find(c.expected), std::string::npos) << s.error().message;
  }
  HostOptions o;
  auto s = apply_environment(o, env_of({{"MEMRA_PORT", "http"}}));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("MEMRA_PORT"), std::string::npos) << s.error().message;
  s = apply_environment(o, env_of({{"MEMRA_MODELS", "a=/x,a=/y"}}));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("MEMRA_MODELS"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("'a' is given twice"), std::string::npos) << s.error().message;
}

TEST(ServerOptions, TlsFilesComeTogether) {
  HostOptions o;
  ASSERT_TRUE(apply_environment(o, env_of({{"MEMRA_TLS_CERT", "/etc/c.pem"}, {"MEMRA_TLS_KEY", "/etc/k.pem"}})));
  EXPECT_EQ(o.tls_cert, "/etc/c.pem");
  EXPECT_EQ(o.tls_key, "/etc/k.pem");
  EXPECT_TRUE(check_options(o));
  ASSERT_TRUE(apply_flag(o, "tls-cert", "/x/c.pem"));
  EXPECT_EQ(o.tls_cert, "/x/c.pem");  // the flag wins
  EXPECT_FALSE(apply_flag(o, "tls-key", ""));

  HostOptions plain;
  EXPECT_TRUE(check_options(plain));  // neither: plain HTTP
  HostOptions cert_only;
  ASSERT_TRUE(apply_flag(cert_only, "tls-cert", "/x/c.pem"));
  auto s = check_options(cert_only);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("--tls-cert is given without --tls-key"), std::string::npos);
  HostOptions key_only;
  ASSERT_TRUE(apply_environment(key_only, env_of({{"MEMRA_TLS_KEY", "/x/k.pem"}})));
  s = check_options(key_only);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("--tls-key is given without --tls-cert"), std::string::npos);
}

TEST(ServerOptions, ModelSpecs) {
  auto plain = parse_model_spec("/models/qwen3-0.6b/");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->alias, "qwen3-0.6b");
  EXPECT_EQ(plain->path, "/models/qwen3-0.6b/");
  auto named = parse_model_spec("chat=/m/x=y.gguf");  // split at the first '='
  ASSERT_TRUE(named);
  EXPECT_EQ(named->alias, "chat");
  EXPECT_EQ(named->path, "/m/x=y.gguf");
  auto list = parse_model_list("a=/x,,b=/y,");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->size(), 2u);
}

}  // namespace
}  // namespace memra::server
