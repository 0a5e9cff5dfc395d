#include "host/chat_template/parser.hpp"

#include <cstdlib>
#include <initializer_list>
#include <string_view>

namespace memra::chat_template {

namespace {

using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;
using ast::Stmt;
using ast::StmtKind;
using ast::StmtPtr;

constexpr int kMaxNesting = 400;  // bounds recursion so hostile templates cannot overflow the stack

ExprPtr make(ExprKind k, Pos p) { return std::make_unique<Expr>(k, p); }

// Marks which of `kwargs` / `varargs` a macro body reads before declaring them, following the visit
// order of the reference (and of Jinja2's code generator).
class SpecialArgScanner {
 public:
  ast::SpecialArgs scan(const std::vector<ExprPtr>& params, const std::vector<StmtPtr>& body) {
    for (const auto& p : params) declare_param(*p);
    visit(body);
    return accessed_;
  }

 private:
  void declare(const std::string& name) {
    if (name == "kwargs") declared_kwargs_ = true;
    if (name == "varargs") declared_varargs_ = true;
  }
  void declare_param(const Expr& p) { declare(p.name); }  // identifier or keyword_argument: both use name
  void declare_target(const Expr* t) {
    if (!t) return;
    if (t->kind == ExprKind::identifier) declare(t->name);
    if (t->kind == ExprKind::tuple_literal) {
      for (const auto& k : t->kids) declare_target(k.get());
    }
  }
  void visit_defaults(const std::vector<ExprPtr>& params) {
    for (const auto& p : params) {
      if (p->kind == ExprKind::keyword_argument) visit(p->kid(0));
    }
  }
  void visit_filter(const Expr* f) {
    if (f && f->kind == ExprKind::call) {
      for (std::size_t i = 1; i < f->kids.size(); ++i) visit(f->kid(i));
    }
  }
  void visit(const std::vector<StmtPtr>& stmts) {
    for (const auto& s : stmts) visit(*s);
  }
  void visit(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::for_:
        declare_target(s.target.get());
        if (s.expr && s.expr->kind == ExprKind::select) {
          visit(s.expr->kid(0));
          visit(s.body);
          visit(s.alt);
          visit(s.expr->kid(1));
        } else {
          visit(s.expr.get());
          visit(s.body);
          visit(s.alt);
        }
        return;
      case StmtKind::set:
        declare_target(s.target.get());
        visit(s.expr.get());
        visit(s.body);
        return;
      case StmtKind::macro:
        for (const auto& p : s.params) declare_param(*p);
        visit_defaults(s.params);
        visit(s.body);
        return;
      case StmtKind::call_block:
        visit(s.expr.get());
        for (const auto& p : s.params) declare_param(*p);
        visit_defaults(s.params);
        visit(s.body);
        return;
      case StmtKind::filter_block:
        visit(s.body);
        visit_filter(s.expr.get());
        return;
      case StmtKind::output:
        visit(s.expr.get());
        return;
      case StmtKind::if_:
        visit(s.expr.get());
        visit(s.body);
        visit(s.alt);
        return;
      default:
        return;
    }
  }
  void visit(const Expr* e) {
    if (!e) return;
    switch (e->kind) {
      case ExprKind::identifier:
        if (e->name == "kwargs" && !declared_kwargs_) accessed_.kwargs = true;
        if (e->name == "varargs" && !declared_varargs_) accessed_.varargs = true;
        return;
      case ExprKind::member:
        visit(e->kid(0));
        if (e->flag) visit(e->kid(1));
        return;
      case ExprKind::filter:
        visit(e->kid(0));
        visit_filter(e->kid(1));
        return;
      case ExprKind::test:
        visit(e->kid(0));
        return;
      case ExprKind::select:
        visit(e->kid(1));
        visit(e->kid(0));
        return;
      case ExprKind::keyword_argument:
        visit(e->kid(0));
        return;
      default:
        for (const auto& k : e->kids) visit(k.get());
        return;
    }
  }

  bool declared_kwargs_ = false;
  bool declared_varargs_ = false;
  ast::SpecialArgs accessed_;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, Pos end) : t_(std::move(tokens)), end_(end) {}

  ast::Program run() {
    ast::Program program;
    while (cur_ < t_.size()) program.body.push_back(parse_any());
    return program;
  }

 private:
  enum class ArgMode { call, parameters };

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.error_here("template nests blocks or expressions too deeply");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  bool at_end() const { return cur_ >= t_.size(); }
  const Token& tok() const {
    if (at_end()) error_here("unexpected end of template");
    return t_[cur_];
  }
  Pos here() const { return at_end() ? end_ : t_[cur_].pos; }

  [[noreturn]] void error_here(std::string message) const { fail_at(here(), std::move(message)); }
  [[noreturn]] void unexpected(const char* expected) const {
    if (at_end()) error_here(std::string("unexpected end of template, expected ") + expected);
    std::string got = token_name(t_[cur_].type);
    if (t_[cur_].type == Tok::identifier || t_[cur_].type == Tok::string_literal ||
        t_[cur_].type == Tok::numeric_literal) {
      got += " '" + t_[cur_].value + "'";
    }
    error_here(std::string("expected ") + expected + ", got " + got);
  }

  bool is(Tok type) const { return !at_end() && t_[cur_].type == type; }
  bool is(Tok a, Tok b) const { return cur_ + 1 < t_.size() && t_[cur_].type == a && t_[cur_ + 1].type == b; }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (cur_ + 1 >= t_.size() || t_[cur_].type != Tok::open_statement || t_[cur_ + 1].type != Tok::identifier) {
      return false;
    }
    for (auto n : names) {
      if (t_[cur_ + 1].value == n) return true;
    }
    return false;
  }
  bool is_identifier(std::string_view name, std::size_t ahead = 0) const {
    return cur_ + ahead < t_.size() && t_[cur_ + ahead].type == Tok::identifier && t_[cur_ + ahead].value == name;
  }

  const Token& expect(Tok type, const char* what) {
    if (!is(type)) unexpected(what);
    return t_[cur_++];
  }
  void expect_identifier(std::string_view name) {
    if (!is_identifier(name)) unexpected(("'" + std::string(name) + "'").c_str());
    ++cur_;
  }

  // Parses statements until one of `names` opens; `opener` names the block for the unclosed message.
  void parse_until(std::vector<StmtPtr>& into, std::initializer_list<std::string_view> names, const char* opener,
                   Pos opener_pos) {
    while (!is_statement(names)) {
      if (at_end()) {
        std::string closers;
        for (auto n : names) closers += std::string(closers.empty() ? "" : " or ") + "{% " + std::string(n) + " %}";
        fail_at(opener_pos, std::string("{% ") + opener + " %} is never closed (expected " + closers + ")");
      }
      into.push_back(parse_any());
    }
  }

  StmtPtr parse_any() {
    DepthGuard guard(*this);
    const Token& t = tok();
    switch (t.type) {
      case Tok::comment: {
        auto s = std::make_unique<Stmt>(StmtKind::comment, t.pos);
        ++cur_;
        return s;
      }
      case Tok::text: {
        auto s = std::make_unique<Stmt>(StmtKind::text, t.pos);
        s->text = t.value;
        ++cur_;
        return s;
      }
      case Tok::open_statement:
        return parse_statement();
      case Tok::open_expression: {
        ++cur_;
        auto s = std::make_unique<Stmt>(StmtKind::output, t.pos);
        s->expr = parse_expression();
        expect(Tok::close_expression, "'}}'");
        return s;
      }
      default:
        error_here(std::string("unexpected ") + token_name(t.type) + " outside a tag");
    }
  }

  StmtPtr parse_statement() {
    const Pos open_pos = tok().pos;
    expect(Tok::open_statement, "'{%'");
    if (!is(Tok::identifier)) unexpected("a statement name");
    const std::string name = tok().value;
    const Pos name_pos = tok().pos;
    StmtPtr result;
    if (name == "set") {
      ++cur_;
      result = parse_set(open_pos);
    } else if (name == "if") {
      ++cur_;
      result = parse_if(open_pos, "if");
      expect(Tok::open_statement, "'{% endif %}'");
      expect_identifier("endif");
      expect(Tok::close_statement, "'%}'");
    } else if (name == "macro") {
      ++cur_;
      result = parse_macro(open_pos);
      expect(Tok::open_statement, "'{% endmacro %}'");
      expect_identifier("endmacro");
      expect(Tok::close_statement, "'%}'");
    } else if (name == "for") {
      ++cur_;
      result = parse_for(open_pos);
      expect(Tok::open_statement, "'{% endfor %}'");
      expect_identifier("endfor");
      expect(Tok::close_statement, "'%}'");
    } else if (name == "call") {
      ++cur_;
      result = std::make_unique<Stmt>(StmtKind::call_block, open_pos);
      if (is(Tok::open_paren)) result->params = parse_args(ArgMode::parameters);
      ExprPtr callee = parse_primary();
      if (callee->kind != ExprKind::identifier) fail_at(callee->pos, "expected a macro name after {% call %}");
      auto call = make(ExprKind::call, callee->pos);
      call->kids.push_back(std::move(callee));
      for (auto& a : parse_args(ArgMode::call)) call->kids.push_back(std::move(a));
      result->expr = std::move(call);
      expect(Tok::close_statement, "'%}'");
      parse_until(result->body, {"endcall"}, "call", open_pos);
      expect(Tok::open_statement, "'{%'");
      expect_identifier("endcall");
      expect(Tok::close_statement, "'%}'");
      result->special = SpecialArgScanner().scan(result->params, result->body);
    } else if (name == "break" || name == "continue") {
      ++cur_;
      expect(Tok::close_statement, "'%}'");
      result = std::make_unique<Stmt>(name == "break" ? StmtKind::break_ : StmtKind::continue_, open_pos);
    } else if (name == "filter") {
      ++cur_;
      result = std::make_unique<Stmt>(StmtKind::filter_block, open_pos);
      ExprPtr f = parse_primary();
      if (f->kind == ExprKind::identifier && is(Tok::open_paren)) f = parse_call(std::move(f));
      result->expr = std::move(f);
      expect(Tok::close_statement, "'%}'");
      parse_until(result->body, {"endfilter"}, "filter", open_pos);
      expect(Tok::open_statement, "'{%'");
      expect_identifier("endfilter");
      expect(Tok::close_statement, "'%}'");
    } else {
      fail_at(name_pos,
              "unknown statement {% " + name +
                  " %} (memra supports set, if, for, macro, call, filter, "
                  "break, continue)",
              ErrorCode::unsupported);
    }
    return result;
  }

  StmtPtr parse_set(Pos open_pos) {
    auto s = std::make_unique<Stmt>(StmtKind::set, open_pos);
    s->target = parse_expression_sequence(false);
    if (is(Tok::equals)) {
      ++cur_;
      s->expr = parse_expression_sequence(false);
    } else {
      expect(Tok::close_statement, "'=' or '%}'");
      parse_until(s->body, {"endset"}, "set", open_pos);
      expect(Tok::open_statement, "'{%'");
      expect_identifier("endset");
    }
    expect(Tok::close_statement, "'%}'");
    return s;
  }

  StmtPtr parse_if(Pos open_pos, const char* opener) {
    auto s = std::make_unique<Stmt>(StmtKind::if_, open_pos);
    s->expr = parse_expression();
    expect(Tok::close_statement, "'%}'");
    parse_until(s->body, {"elif", "else", "endif"}, opener, open_pos);
    if (is_statement({"elif"})) {
      const Pos elif_pos = tok().pos;
      cur_ += 2;
      s->alt.push_back(parse_if(elif_pos, "elif"));
    } else if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::close_statement, "'%}'");
      parse_until(s->alt, {"endif"}, opener, open_pos);
    }
    return s;
  }

  StmtPtr parse_macro(Pos open_pos) {
    auto s = std::make_unique<Stmt>(StmtKind::macro, open_pos);
    ExprPtr name = parse_primary();
    if (name->kind != ExprKind::identifier) fail_at(name->pos, "expected a macro name after {% macro %}");
    s->text = name->name;
    s->params = parse_args(ArgMode::parameters);
    expect(Tok::close_statement, "'%}'");
    parse_until(s->body, {"endmacro"}, "macro", open_pos);
    s->special = SpecialArgScanner().scan(s->params, s->body);
    return s;
  }

  StmtPtr parse_for(Pos open_pos) {
    auto s = std::make_unique<Stmt>(StmtKind::for_, open_pos);
    s->target = parse_expression_sequence(true);
    if (s->target->kind != ExprKind::identifier && s->target->kind != ExprKind::tuple_literal) {
      fail_at(s->target->pos, "expected a loop variable name or tuple after {% for %}");
    }
    if (!is_identifier("in")) unexpected("'in' after the loop variable");
    ++cur_;
    s->expr = parse_expression();
    expect(Tok::close_statement, "'%}'");
    parse_until(s->body, {"endfor", "else"}, "for", open_pos);
    if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::close_statement, "'%}'");
      parse_until(s->alt, {"endfor"}, "for", open_pos);
    }
    return s;
  }

  ExprPtr parse_expression_sequence(bool primary) {
    const Pos p = here();
    std::vector<ExprPtr> items;
    items.push_back(primary ? parse_primary() : parse_expression());
    const bool tuple = is(Tok::comma);
    while (tuple) {
      ++cur_;
      items.push_back(primary ? parse_primary() : parse_expression());
      if (!is(Tok::comma)) break;
    }
    if (!tuple) return std::move(items[0]);
    auto t = make(ExprKind::tuple_literal, p);
    t->kids = std::move(items);
    return t;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this);
    return parse_if_expression();
  }

  ExprPtr parse_if_expression() {
    ExprPtr a = parse_or();
    if (is_identifier("if")) {
      const Pos p = tok().pos;
      ++cur_;
      ExprPtr test = parse_or();
      if (is_identifier("else")) {
        ++cur_;
        ExprPtr f = parse_if_expression();
        auto t = make(ExprKind::ternary, p);
        t->kids.push_back(std::move(test));
        t->kids.push_back(std::move(a));
        t->kids.push_back(std::move(f));
        return t;
      }
      auto s = make(ExprKind::select, p);
      s->kids.push_back(std::move(a));
      s->kids.push_back(std::move(test));
      return s;
    }
    return a;
  }

  ExprPtr binary(std::string op, Pos p, ExprPtr l, ExprPtr r) {
    auto b = make(ExprKind::binary, p);
    b->name = std::move(op);
    b->kids.push_back(std::move(l));
    b->kids.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_identifier("or")) {
      const Pos p = tok().pos;
      ++cur_;
      left = binary("or", p, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_identifier("and")) {
      const Pos p = tok().pos;
      ++cur_;
      left = binary("and", p, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    DepthGuard guard(*this);
    ExprPtr right;
    while (is_identifier("not")) {
      const Pos p = tok().pos;
      ++cur_;
      auto u = make(ExprKind::unary, p);
      u->name = "not";
      u->kids.push_back(parse_not());
      right = std::move(u);
    }
    return right ? std::move(right) : parse_comparison();
  }

  ExprPtr parse_comparison() {
    ExprPtr left = parse_additive();
    while (true) {
      std::string op;
      const Pos p = here();
      if (is_identifier("not") && is_identifier("in", 1)) {
        op = "not in";
        cur_ += 2;
      } else if (is_identifier("in")) {
        op = "in";
        ++cur_;
      } else if (is(Tok::comparison_op)) {
        op = t_[cur_++].value;
      } else {
        break;
      }
      left = binary(std::move(op), p, std::move(left), parse_additive());
    }
    return left;
  }

  ExprPtr parse_additive() {
    ExprPtr left = parse_multiplicative();
    while (is(Tok::additive_op)) {
      const Pos p = tok().pos;
      std::string op = t_[cur_++].value;
      left = binary(std::move(op), p, std::move(left), parse_multiplicative());
    }
    return left;
  }

  ExprPtr parse_multiplicative() {
    ExprPtr left = parse_power();
    while (is(Tok::multiplicative_op)) {
      const Pos p = tok().pos;
      std::string op = t_[cur_++].value;
      left = binary(std::move(op), p, std::move(left), parse_power());
    }
    return left;
  }

  ExprPtr parse_power() {
    ExprPtr left = parse_test();
    while (is(Tok::exponentiation_op)) {
      const Pos p = tok().pos;
      ++cur_;
      left = binary("**", p, std::move(left), parse_test());
    }
    return left;
  }

  ExprPtr parse_test() {
    ExprPtr operand = parse_filter();
    while (is_identifier("is")) {
      ++cur_;
      const bool negate = is_identifier("not");
      if (negate) ++cur_;
      ExprPtr name = parse_primary();
      if (name->kind != ExprKind::identifier) fail_at(name->pos, "expected a test name after 'is'");
      auto t = make(ExprKind::test, name->pos);
      t->name = name->name;
      t->flag = negate;
      t->kids.push_back(std::move(operand));
      operand = std::move(t);
    }
    return operand;
  }

  ExprPtr parse_filter() {
    ExprPtr operand = parse_unary_sign();
    while (is(Tok::pipe)) {
      ++cur_;
      ExprPtr f = parse_primary();
      if (f->kind != ExprKind::identifier) fail_at(f->pos, "expected a filter name after '|'");
      if (is(Tok::open_paren)) f = parse_call(std::move(f));
      auto e = make(ExprKind::filter, f->pos);
      e->kids.push_back(std::move(operand));
      e->kids.push_back(std::move(f));
      operand = std::move(e);
    }
    return operand;
  }

  ExprPtr parse_unary_sign() {
    DepthGuard guard(*this);
    if (!at_end() && (t_[cur_].type == Tok::unary_op || t_[cur_].type == Tok::additive_op) &&
        (t_[cur_].value == "-" || t_[cur_].value == "+")) {
      const Pos p = tok().pos;
      auto u = make(ExprKind::unary, p);
      u->name = t_[cur_++].value;
      u->kids.push_back(parse_unary_sign());
      return u;
    }
    return parse_call_member();
  }

  ExprPtr parse_call_member() {
    ExprPtr member = parse_member(parse_primary());
    if (is(Tok::open_paren)) return parse_call(std::move(member));
    return member;
  }

  ExprPtr parse_call(ExprPtr callee) {
    DepthGuard guard(*this);
    auto call = make(ExprKind::call, callee->pos);
    call->kids.push_back(std::move(callee));
    for (auto& a : parse_args(ArgMode::call)) call->kids.push_back(std::move(a));
    ExprPtr e = parse_member(std::move(call));
    if (is(Tok::open_paren)) e = parse_call(std::move(e));
    return e;
  }

  std::vector<ExprPtr> parse_args(ArgMode mode) {
    expect(Tok::open_paren, "'('");
    std::vector<ExprPtr> args;
    std::vector<std::string> names;
    bool saw_keyword = false, saw_spread = false;
    while (!is(Tok::close_paren)) {
      if (at_end()) unexpected("')'");
      const bool kw_spread = is(Tok::exponentiation_op);
      const bool pos_spread = is(Tok::multiplicative_op) && tok().value == "*";
      if (mode == ArgMode::parameters && (kw_spread || pos_spread)) {
        error_here("argument unpacking is not allowed in parameter declarations");
      }
      const Pos p = tok().pos;
      if (kw_spread) {
        ++cur_;
        auto e = make(ExprKind::keyword_spread, p);
        e->kids.push_back(parse_expression());
        args.push_back(std::move(e));
        if (is(Tok::comma)) ++cur_;
        if (!is(Tok::close_paren)) error_here("`**` must be applied to the final argument");
        break;
      }
      ExprPtr arg;
      if (pos_spread) {
        if (saw_spread) error_here("only one `*` argument unpacking is allowed");
        saw_spread = true;
        ++cur_;
        arg = make(ExprKind::spread, p);
        arg->kids.push_back(parse_expression());
      } else {
        arg = parse_expression();
        if (is(Tok::equals)) {
          ++cur_;
          if (arg->kind != ExprKind::identifier) {
            fail_at(arg->pos, mode == ArgMode::parameters ? "expected an identifier for a parameter declaration"
                                                          : "expected an identifier for a keyword argument");
          }
          auto kw = make(ExprKind::keyword_argument, arg->pos);
          kw->name = arg->name;
          kw->kids.push_back(parse_expression());
          arg = std::move(kw);
        }
        if (mode == ArgMode::parameters) {
          if (arg->kind != ExprKind::identifier && arg->kind != ExprKind::keyword_argument) {
            fail_at(arg->pos, "expected an identifier for a parameter declaration");
          }
          for (const auto& n : names) {
            if (n == arg->name) fail_at(arg->pos, "duplicate parameter name '" + arg->name + "'");
          }
          names.push_back(arg->name);
        }
        if (arg->kind == ExprKind::keyword_argument) {
          saw_keyword = true;
        } else if (saw_keyword) {
          fail_at(arg->pos, mode == ArgMode::call ? "positional arguments must come before keyword arguments"
                                                  : "non-default argument follows default argument");
        } else if (saw_spread) {
          fail_at(arg->pos, "positional arguments must not follow `*` argument unpacking");
        }
      }
      args.push_back(std::move(arg));
      if (is(Tok::comma)) ++cur_;
    }
    expect(Tok::close_paren, "')'");
    return args;
  }

  ExprPtr parse_subscript() {
    const Pos p = here();
    std::vector<ExprPtr> slices;
    bool is_slice = false;
    while (!is(Tok::close_square_bracket)) {
      if (at_end()) unexpected("']'");
      if (is(Tok::colon)) {
        slices.push_back(nullptr);
        ++cur_;
        is_slice = true;
      } else {
        slices.push_back(parse_expression());
        if (is(Tok::colon)) {
          ++cur_;
          is_slice = true;
        }
      }
    }
    if (slices.empty()) error_here("expected at least one argument for a subscript or slice");
    if (is_slice) {
      if (slices.size() > 3) fail_at(p, "a slice takes at most 3 parts (start:stop:step)");
      auto s = make(ExprKind::slice, p);
      s->kids = std::move(slices);
      while (s->kids.size() < 3) s->kids.push_back(nullptr);
      return s;
    }
    return std::move(slices[0]);
  }

  ExprPtr parse_member(ExprPtr object) {
    while (is(Tok::dot) || is(Tok::open_square_bracket)) {
      const bool computed = is(Tok::open_square_bracket);
      const Pos p = tok().pos;
      ++cur_;
      ExprPtr property;
      if (computed) {
        property = parse_subscript();
        expect(Tok::close_square_bracket, "']'");
      } else {
        property = parse_primary();
        if (property->kind != ExprKind::identifier && property->kind != ExprKind::integer_literal) {
          fail_at(property->pos, "expected an attribute name or integer after '.'");
        }
      }
      auto m = make(ExprKind::member, p);
      m->flag = computed;
      m->kids.push_back(std::move(object));
      m->kids.push_back(std::move(property));
      object = std::move(m);
    }
    return object;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    if (at_end()) unexpected("an expression");
    const Token& t = t_[cur_++];
    switch (t.type) {
      case Tok::numeric_literal: {
        const bool is_float = t.value.find('.') != std::string::npos;
        auto e = make(is_float ? ExprKind::float_literal : ExprKind::integer_literal, t.pos);
        e->number = std::strtod(t.value.c_str(), nullptr);
        return e;
      }
      case Tok::string_literal: {
        auto e = make(ExprKind::string_literal, t.pos);
        e->name = t.value;
        while (is(Tok::string_literal)) e->name += t_[cur_++].value;
        return e;
      }
      case Tok::identifier: {
        auto e = make(ExprKind::identifier, t.pos);
        e->name = t.value;
        return e;
      }
      case Tok::open_paren: {
        ExprPtr e = parse_expression_sequence(false);
        expect(Tok::close_paren, "')'");
        return e;
      }
      case Tok::open_square_bracket: {
        auto e = make(ExprKind::array_literal, t.pos);
        while (!is(Tok::close_square_bracket)) {
          if (at_end()) unexpected("']'");
          e->kids.push_back(parse_expression());
          if (is(Tok::comma)) ++cur_;
        }
        ++cur_;
        return e;
      }
      case Tok::open_curly_bracket: {
        auto e = make(ExprKind::object_literal, t.pos);
        while (!is(Tok::close_curly_bracket)) {
          if (at_end()) unexpected("'}'");
          e->kids.push_back(parse_expression());
          expect(Tok::colon, "':' between key and value in a dict literal");
          e->kids.push_back(parse_expression());
          if (is(Tok::comma)) ++cur_;
        }
        ++cur_;
        return e;
      }
      default:
        --cur_;
        unexpected("an expression");
    }
  }

  std::vector<Token> t_;
  Pos end_;
  std::size_t cur_ = 0;
  int depth_ = 0;
};

}  // namespace

ast::Program parse(std::vector<Token> tokens, Pos end) { return Parser(std::move(tokens), end).run(); }

}  // namespace memra::chat_template
