#include "host/chat_template/value.hpp"

namespace memra::chat_template {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

bool Object::erase(std::string_view key) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == key) {
      entries_.erase(it);
      return true;
    }
  }
  return false;
}

Value Value::string(std::string s) {
  Value v(Kind::string);
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::array(std::vector<Value> items, bool tuple) {
  auto a = std::make_shared<Array>();
  a->items = std::move(items);
  a->is_tuple = tuple;
  return array(std::move(a));
}

Value Value::array(std::shared_ptr<Array> a) {
  Value v(Kind::array);
  v.ptr_ = std::move(a);
  return v;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v(Kind::object);
  v.ptr_ = std::move(o);
  return v;
}

Value Value::namespace_(std::shared_ptr<Object> o) {
  Value v(Kind::namespace_);
  v.ptr_ = std::move(o);
  return v;
}

Value Value::function(std::shared_ptr<const Function> f) {
  Value v(Kind::function);
  v.ptr_ = std::const_pointer_cast<Function>(std::move(f));
  return v;
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::undefined:
      return "UndefinedValue";
    case Kind::absent:
      return "undefined";
    case Kind::null:
      return "NullValue";
    case Kind::boolean:
      return "BooleanValue";
    case Kind::integer:
      return "IntegerValue";
    case Kind::floating:
      return "FloatValue";
    case Kind::string:
      return "StringValue";
    case Kind::array:
      return arr().is_tuple ? "TupleValue" : "ArrayValue";
    case Kind::object:
      return obj().is_kwargs ? "KeywordArgumentsValue" : "ObjectValue";
    case Kind::namespace_:
      return "NamespaceValue";
    case Kind::function:
      return "FunctionValue";
  }
  return "?";
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::absent:
    case Kind::null:
      return false;
    case Kind::boolean:
    case Kind::integer:
    case Kind::floating:
      return num_ != 0 && num_ == num_;  // NaN is falsy, as in JS
    case Kind::string:
      return !str().empty();
    case Kind::array:
      return !arr().items.empty();
    case Kind::object:
      return !obj().empty();
    case Kind::namespace_:
    case Kind::function:
      return true;
  }
  return false;
}

}  // namespace memra::chat_template
