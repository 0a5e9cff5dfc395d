// The interpreter's dynamic value, modelled on @huggingface/jinja's runtime values so that every
// operation can reproduce its behaviour: integers and floats are both IEEE doubles (JS numbers) that
// differ only in how they print; arrays and objects are shared and compared by identity; objects keep
// insertion order.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memra::chat_template {

enum class Kind : unsigned char {
  undefined,  // UndefinedValue: a missing variable/attribute
  absent,     // a raw JS `undefined` (e.g. `[]|first`): storable, but most operations on it fail
  null,
  boolean,
  integer,
  floating,
  string,
  array,       // also tuples (Array::is_tuple)
  object,      // also keyword-argument bundles (Object::is_kwargs)
  namespace_,  // namespace(...): mutable attributes, no dict methods
  function,
};

class Value;
struct Function;  // defined by the interpreter

struct Array {
  std::vector<Value> items;
  bool is_tuple = false;
};

// Insertion-ordered string-keyed map; setting an existing key keeps its position (JS Map semantics).
class Object {
 public:
  bool is_kwargs = false;

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
  bool erase(std::string_view key);
  std::size_t size() const;  // defined below Value (a complete type is needed)
  bool empty() const;
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined() { return Value(); }
  static Value absent() { return Value(Kind::absent); }
  static Value null() { return Value(Kind::null); }
  static Value boolean(bool b) {
    Value v(Kind::boolean);
    v.num_ = b ? 1 : 0;
    return v;
  }
  static Value integer(double d) {
    Value v(Kind::integer);
    v.num_ = d;
    return v;
  }
  static Value floating(double d) {
    Value v(Kind::floating);
    v.num_ = d;
    return v;
  }
  static Value string(std::string s);
  static Value array(std::vector<Value> items, bool tuple = false);
  static Value array(std::shared_ptr<Array> a);
  static Value object(std::shared_ptr<Object> o);
  static Value object() { return object(std::make_shared<Object>()); }
  static Value namespace_(std::shared_ptr<Object> o);
  static Value function(std::shared_ptr<const Function> f);

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating; }
  bool is_numeric_like() const { return is_number() || kind_ == Kind::boolean; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }                 // incl. tuples (instanceof ArrayValue)
  bool is_plain_array() const { return is_array() && !arr().is_tuple; }  // type === "ArrayValue"
  bool is_object() const { return kind_ == Kind::object; }               // incl. kwargs (instanceof ObjectValue)
  bool is_plain_object() const { return is_object() && !obj().is_kwargs; }
  bool is_attribute_container() const { return kind_ == Kind::object || kind_ == Kind::namespace_; }

  bool as_bool() const { return num_ != 0; }
  double num() const { return num_; }  // integer, floating; boolean as 0/1
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const Array& arr() const { return *static_cast<const Array*>(ptr_.get()); }
  const Object& obj() const { return *static_cast<const Object*>(ptr_.get()); }  // object and namespace
  Object& mutable_obj() const { return *static_cast<Object*>(ptr_.get()); }
  const Function& fn() const { return *static_cast<const Function*>(ptr_.get()); }
  std::shared_ptr<const Function> fn_ptr() const { return std::static_pointer_cast<const Function>(ptr_); }
  const void* identity() const { return ptr_.get(); }

  // @huggingface/jinja's type names, used in error messages.
  std::string_view type_name() const;
  // __bool__: Python truthiness (empty containers are false; a namespace is always true).
  // Precondition: not absent.
  bool truthy() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::undefined;
  double num_ = 0;
  std::shared_ptr<void> ptr_;
};

inline std::size_t Object::size() const { return entries_.size(); }
inline bool Object::empty() const { return entries_.empty(); }

}  // namespace memra::chat_template
