// libFuzzer target: the chat-template entry points. The first byte picks one:
//  even: the rest is a render context (JSON, as the server builds from a request) for a
//        ChatML template with tools, as a client controls it;
//  odd:  the rest is "template\x00context": a template compiled and rendered (templates
//        come from model files and --chat-template; they must fail cleanly too).
// Nothing may crash or run away; the limits (output size, loop iterations, call depth,
// nesting) turn hostile input into an Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "host/chat_template/chat_template.hpp"

namespace {

constexpr const char* kChatml =
    "{%- if tools %}<|im_start|>system\n{%- for t in tools %}{{ t | tojson }}\n{%- endfor %}<|im_end|>\n{%- endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{%- if m.tool_calls %}{%- for c in m.tool_calls %}<tool_call>{{ c.function.arguments | tojson }}</tool_call>"
    "{%- endfor %}{%- endif %}<|im_end|>\n{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}";

memra::chat_template::RenderOptions options() {
  memra::chat_template::RenderOptions o;
  o.limits.max_output_bytes = 1 << 20;
  o.limits.max_loop_iterations = 100000;
  o.now_unix_seconds = 0;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    static const auto chatml = memra::chat_template::compile(kChatml);
    if (!chatml) std::abort();
    auto out = chatml->render_json_text(rest, options());
    if (!out && out.error().message.empty()) std::abort();
    return 0;
  }
  const std::size_t cut = rest.find('\0');
  auto tpl = memra::chat_template::compile(rest.substr(0, cut));
  if (!tpl) return 0;
  const std::string_view context = cut == std::string_view::npos ? std::string_view("{}") : rest.substr(cut + 1);
  auto out = tpl->render_json_text(context, options());
  if (!out && out.error().message.empty()) std::abort();
  return 0;
}
