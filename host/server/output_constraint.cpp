#include "host/server/output_constraint.hpp"

#include <set>

#include "host/structured/grammar_constraint.hpp"
#include "host/structured/json_grammar.hpp"
#include "host/structured/thinking_grammar.hpp"

namespace memra::server {
namespace {

using namespace structured;
using ojson = nlohmann::ordered_json;

ApiError schema_error(const SchemaError& e, const std::string& param) {
  return errors::invalid_request(e.unsupported ? "unsupported_parameter" : "invalid_value", param + ": " + e.message, param);
}

// One call of `tool` in `format`, its arguments from the tool's parameter schema.
std::optional<ApiError> tool_call_expr(JsonGrammarCompiler& json, const ToolDef& tool, size_t index, ToolFormat format,
                                       ExprPtr& out) {
  const std::string param = "tools[" + std::to_string(index) + "].function.parameters";
  if (format == ToolFormat::qwen3_coder) {
    // <function=NAME>\n then each property as <parameter=K>\nVALUE\n</parameter>\n, in schema
    // order (required ones always, optional ones may be left out); string values are text
    // without '<', other values JSON of their schema.
    const CallFrame frame = forced_call_frame(format, tool.name);
    std::vector<ExprPtr> parts = {lit(frame.head)};
    const ojson props = tool.parameters.value("properties", ojson::object());
    std::set<std::string> required;
    for (const auto& r : tool.parameters.value("required", ojson::array()))
      if (r.is_string()) required.insert(r.get<std::string>());
    for (const auto& [key, sub] : props.items()) {
      ExprPtr value;
      if (coder_plain_string(sub)) {
        value = star(cls(ByteSet::range(0x01, 0xFF).remove("<")));
      } else {
        uint32_t rule = 0;
        if (auto e = json.compile(sub, rule)) return schema_error(*e, param + ".properties." + key);
        value = ref(rule);
      }
      ExprPtr p = seq({lit(std::string(kCoderParameterOpen) + key + ">\n"), value, lit(std::string(kCoderParameterClose))});
      parts.push_back(required.count(key) ? p : opt(p));
    }
    parts.push_back(lit(frame.tail));
    out = seq(std::move(parts));
    return std::nullopt;
  }
  uint32_t args = 0;
  if (auto e = json.compile(tool.parameters, args)) return schema_error(*e, param);
  if (format == ToolFormat::pythonic) {
    return errors::invalid_request("unsupported_parameter",
                                   "a required or named tool_choice is not supported for models that call tools in "
                                   "Python syntax; use tool_choice auto",
                                   std::string("tool_choice"));
  }
  const CallFrame frame = forced_call_frame(format, tool.name);  // hermes, llama3_json
  out = seq({lit(frame.head), ref(args), lit(frame.tail)});
  return std::nullopt;
}

}  // namespace

bool wants_constraint(const CompletionRequest& r) {
  return r.response_format.type != ResponseFormatType::text || r.tool_choice.mode == ToolChoiceMode::required ||
         r.tool_choice.mode == ToolChoiceMode::named;
}

OutputConstraint output_constraint(ServedModel& model, const CompletionRequest& r, ToolFormat format,
                                   const ThinkingGate& thinking) {
  OutputConstraint out;
  const bool budgeted = thinking.active() && thinking.budget.has_value();
  if (!wants_constraint(r) && !budgeted) return out;
  GrammarBuilder b(kMaxGrammarElements);
  JsonGrammarCompiler json(b);
  uint32_t root = 0;
  const bool forced = r.tool_choice.mode == ToolChoiceMode::required || r.tool_choice.mode == ToolChoiceMode::named;
  if (forced) {
    std::vector<ExprPtr> calls;
    for (size_t i = 0; i < r.tools.size(); ++i) {
      if (r.tool_choice.mode == ToolChoiceMode::named && r.tools[i].name != r.tool_choice.name) continue;
      ExprPtr call;
      if (auto e = tool_call_expr(json, r.tools[i], i, format == ToolFormat::none ? ToolFormat::hermes : format, call)) {
        out.error = std::move(e);
        return out;
      }
      calls.push_back(std::move(call));
    }
    const ExprPtr one = alt(std::move(calls));
    const std::string sep = format == ToolFormat::llama3_json ? "; " : "\n";
    root = b.add(r.parallel_tool_calls && r.tool_choice.mode == ToolChoiceMode::required
                     ? seq({one, star(seq({lit(sep), one}))})
                     : one);
  } else if (!wants_constraint(r)) {
    root = b.add(star(cls(ByteSet::range(0x00, 0xFF))));  // free text: only the budget is enforced
  } else if (r.response_format.type == ResponseFormatType::json_object) {
    root = json.any_object();
  } else {
    if (auto e = json.compile(r.response_format.schema, root)) {
      out.error = schema_error(*e, "response_format.json_schema.schema");
      return out;
    }
  }
  std::optional<uint32_t> forced_close;
  if (thinking.active()) {
    const ThinkingMarkers m{thinking.markers->open, thinking.markers->close};
    if (budgeted) forced_close = b.add(close_then(m, ref(root)));
    root = b.add(thinking_then(b, m, thinking.starts_inside, thinking.may_open, ref(root)));
  }
  if (b.over_limit()) {
    out.error = errors::invalid_request("invalid_value", "the schema compiles to a grammar too large to enforce (over " +
                                                             std::to_string(kMaxGrammarElements) + " elements)",
                                        forced ? "tools" : "response_format");
    return out;
  }
  if (forced_close) {
    GrammarBuilder copy = b;
    auto after = std::make_shared<const CompiledGrammar>(std::move(copy).build(*forced_close), model.token_vocabulary());
    auto main = std::make_shared<const CompiledGrammar>(std::move(b).build(root), model.token_vocabulary());
    const ThinkingMarkers m{thinking.markers->open, thinking.markers->close};
    out.factory = [main, after, m, inside = thinking.starts_inside, budget = *thinking.budget] {
      return std::make_unique<ThinkingBudgetConstraint>(main, after, m, inside, budget);
    };
    return out;
  }
  auto grammar = std::make_shared<const CompiledGrammar>(std::move(b).build(root), model.token_vocabulary());
  out.factory = [grammar] { return grammar->constraint(grammar); };
  return out;
}

}  // namespace memra::server
