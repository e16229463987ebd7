#pragma once
// Engine internals shared by the interpreter, filters, tests, methods and globals.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace densa::jinja {

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;

  // Takes the argument at `index` or named `name` (removing it); nullopt-like Undefined when
  // absent. `take` of a positional shifts nothing: positions are fixed by the signature.
  Value take(size_t index, std::string_view name);
  bool has(size_t index, std::string_view name) const;
  // Fails naming `what` when arguments remain that the callee does not take.
  void finish(std::string_view what);
  std::vector<bool> used;
};

struct Callable {
  virtual ~Callable() = default;
  virtual std::string name() const = 0;
  virtual Value call(Interp& in, CallArgs& args) = 0;
  // Attribute access on the object (loop.index, ...); Undefined when absent.
  virtual Value getattr(Interp& in, std::string_view attr) { return Value::undefined(); }
};

// A builtin function or bound method implemented in C++.
struct NativeFn : Callable {
  using Fn = std::function<Value(Interp&, CallArgs&)>;
  NativeFn(std::string n, Fn f) : name_(std::move(n)), fn_(std::move(f)) {}
  std::string name() const override { return name_; }
  Value call(Interp& in, CallArgs& args) override { return fn_(in, args); }
  std::string name_;
  Fn fn_;
};

// One render: variable frames, the output limits, and the tree walk (interp.cpp).
class Interp {
 public:
  explicit Interp(const RenderLimits& limits) : limits_(limits) {}
  const RenderLimits& limits() const { return limits_; }

  // Counts one evaluation step; fails past the step limit.
  void step() {
    if (++steps_ > limits_.max_steps)
      throw Error("template exceeded the step limit (" + std::to_string(limits_.max_steps) + " steps)", 0, 0,
                  Error::Kind::kLimit);
  }
  void check_size(size_t bytes) const {
    if (bytes > limits_.max_output_bytes)
      throw Error("template output exceeded the size limit (" + std::to_string(limits_.max_output_bytes) + " bytes)",
                  0, 0, Error::Kind::kLimit);
  }
  // Calls a value (macro, builtin, method).
  Value call(const Value& callee, CallArgs& args);
  // Jinja2's getattr / getitem (sandboxed: mutating methods are refused).
  Value getattr(const Value& obj, std::string_view attr);
  Value getitem(const Value& obj, const Value& key);
  // Runs the named test / filter (for select, map, ...); fails naming an unknown one.
  bool run_test(std::string_view name, const Value& v, CallArgs& args);
  Value run_filter(std::string_view name, const Value& v, CallArgs& args);

  // Renders the template body with `vars` (a dict) as the context.
  void render(const ParsedTemplate& t, const Value& vars, std::string& out);
  // Namespaces are the only values a template can mutate, so the only way to a reference
  // cycle (`{% set ns.me = ns %}`, or a list holding ns stored in ns): render() empties every
  // namespace this render created when it ends, error or not, so a cycle never outlives it.
  // A weak reference pins the allocation of a make_shared object, so the references to
  // namespaces already gone are dropped whenever the list doubles (amortized O(1)): a loop
  // creating namespaces keeps only the live ones' memory, as it did before the tracking.
  void track_namespace(const Value& ns) {
    if (namespaces_.size() >= prune_at_) {
      std::erase_if(namespaces_, [](const std::weak_ptr<void>& w) { return w.expired(); });
      prune_at_ = std::max<size_t>(64, 2 * namespaces_.size());
    }
    namespaces_.push_back(ns.weak_ref());
  }

  struct Frame {
    Frame* parent = nullptr;
    std::vector<std::pair<std::string, Value>> vars;
    Value* find(std::string_view name);
    void set(std::string_view name, Value v);
  };
  enum class Flow : uint8_t { kNormal, kBreak, kContinue };

  // Executes `body` with `frame` as the innermost scope, appending to `out`.
  Flow exec_body(const Body& body, Frame& frame, std::string& out);
  Value eval(const Expr& e, Frame& frame);
  Frame* root() { return root_; }

  // Nesting guard for recursive evaluation (macros, nested expressions).
  struct DepthGuard {
    explicit DepthGuard(Interp& in) : in(in) {
      if (++in.depth_ > in.limits_.max_depth)
        throw Error("template recursion exceeded the depth limit (" + std::to_string(in.limits_.max_depth) + ")", 0, 0,
                    Error::Kind::kLimit);
    }
    ~DepthGuard() { --in.depth_; }
    Interp& in;
  };

 private:
  Flow exec(const Node& n, Frame& frame, std::string& out);
  Value eval_inner(const Expr& e, Frame& frame);
  Flow exec_for(const Node& n, Frame& frame, std::string& out);
  void exec_set(const Node& n, Frame& frame);
  void define_macro(const Node& n, Frame& frame);
  void exec_call_block(const Node& n, Frame& frame, std::string& out);
  Value eval_filter(const Expr& e, Frame& frame, const Value* block_operand);
  Value eval_call(const Expr& e, Frame& frame);
  Value eval_compare(const Expr& e, Frame& frame);
  void eval_args(const Expr& e, Frame& frame, CallArgs& args, size_t first);

  const RenderLimits& limits_;
  int64_t steps_ = 0;
  int depth_ = 0;
  Frame* root_ = nullptr;
  std::vector<std::weak_ptr<void>> namespaces_;
  size_t prune_at_ = 64;
};

// Raises the Undefined error that using `v` in an operation raises in Jinja2.
[[noreturn]] void fail_undefined(const Value& v);
// Python's iteration of a value (list, tuple, dict keys, str characters, Undefined: empty);
// fails for what Python cannot iterate.
List iterate(const Value& v);
// Python len(); fails for what has none.
int64_t py_len(const Value& v);
// Python < (for sort / min / max / comparisons); fails for unorderable types.
bool less_than(const Value& a, const Value& b);
// json.dumps as HF's tojson filter calls it.
// indent: null for one line; item_sep / key_sep: null for json.dumps's defaults.
std::string to_json(Interp& in, const Value& v, const std::string* indent, bool ensure_ascii,
                    const std::string* item_sep, const std::string* key_sep, bool sort_keys);
// Python str methods shared with filters (strip with optional chars; which: 'b'oth, 'l', 'r').
std::string py_strip(std::string_view s, const Value& chars, char which);
// Python str.replace.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// The Python method `name` of `self` (str / dict / list methods); Undefined when none.
Value bound_method(const Value& self, std::string_view name);
// Global functions (range, dict, namespace, raise_exception, strftime_now, ...).
Value find_global(std::string_view name);
// Python slicing with optional bounds (Undefined / None for absent).
Value slice_value(const Value& v, const Value& start, const Value& stop, const Value& step);
std::string escape_html(std::string_view s);

}  // namespace densa::jinja
