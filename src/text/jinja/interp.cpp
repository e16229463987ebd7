// The tree walk: statements, expressions, scopes (Jinja2's: a for-loop iteration and a macro
// call get their own scope, `if` does not), macros, call blocks and the loop object.
#include "text/jinja/internal.h"
#include "text/jinja/ops.h"

namespace densa::jinja {

Value* Interp::Frame::find(std::string_view name) {
  for (Frame* f = this; f; f = f->parent)
    for (auto& [k, v] : f->vars)
      if (k == name) return &v;
  return nullptr;
}

void Interp::Frame::set(std::string_view name, Value v) {
  for (auto& [k, e] : vars) {
    if (k == name) {
      e = std::move(v);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(v));
}

namespace {

// Jinja2's quoted name for an object in "has no attribute" messages ('dict object').
std::string object_desc(const Value& v) {
  std::string s = "'";
  if (v.is_none()) s += "None";
  else if (v.is_namespace()) s += "jinja2.utils.Namespace object";
  else s.append(v.type_name()).append(" object");
  return s += "'";
}

struct LoopObject : Callable {
  const List* items = nullptr;
  size_t index = 0;
  std::string name() const override { return "loop"; }
  Value call(Interp&, CallArgs&) override { throw Error("unsupported: recursive loop() calls"); }
  Value getattr(Interp& in, std::string_view a) override {
    const int64_t n = static_cast<int64_t>(items->size()), i = static_cast<int64_t>(index);
    if (a == "index") return Value::integer(i + 1);
    if (a == "index0") return Value::integer(i);
    if (a == "revindex") return Value::integer(n - i);
    if (a == "revindex0") return Value::integer(n - i - 1);
    if (a == "first") return Value::boolean(i == 0);
    if (a == "last") return Value::boolean(i == n - 1);
    if (a == "length") return Value::integer(n);
    if (a == "depth") return Value::integer(1);
    if (a == "depth0") return Value::integer(0);
    if (a == "previtem") return i > 0 ? (*items)[index - 1] : Value::undefined("there is no previous item");
    if (a == "nextitem") return i + 1 < n ? (*items)[index + 1] : Value::undefined("there is no next item");
    if (a == "cycle") {
      const size_t at = index;
      return Value::callable(std::make_shared<NativeFn>("loop.cycle", [at](Interp&, CallArgs& args) {
        if (args.pos.empty()) throw Error("no items for cycling given");
        return args.pos[at % args.pos.size()];
      }));
    }
    if (a == "changed") throw Error("unsupported: loop.changed()");
    return Value::undefined("'LoopContext' object has no attribute '" + std::string(a) + "'");
  }
};

struct MacroFn : Callable {
  const Node* def = nullptr;
  Interp::Frame* scope = nullptr;  // the frame the body sees (the template's, or a call site's)
  bool is_caller = false;
  std::string name() const override { return is_caller ? "caller" : def->name; }

  Value call(Interp& in, CallArgs& args) override {
    Interp::DepthGuard guard(in);
    Interp::Frame frame;
    frame.parent = scope;
    const auto& params = def->params;
    if (args.pos.size() > params.size())
      throw Error("macro '" + name() + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
    for (size_t k = 0; k < params.size(); ++k) {
      const MacroParam& p = params[k];
      Value v;
      bool given = false;
      if (k < args.pos.size()) v = args.pos[k], given = true;
      for (auto& [kn, kv] : args.kw) {
        if (kn != p.name) continue;
        if (given) throw Error("macro '" + name() + "' got multiple values for argument '" + p.name + "'");
        v = kv, given = true;
      }
      if (!given) v = p.default_value ? in.eval(*p.default_value, frame) : Value::undefined("parameter '" + p.name + "' was not provided");
      frame.set(p.name, std::move(v));
    }
    for (auto& [kn, kv] : args.kw) {
      bool known = kn == "caller";
      for (const MacroParam& p : params) known = known || p.name == kn;
      if (!known) throw Error("macro '" + name() + "' takes no keyword argument '" + kn + "'");
      if (kn == "caller") frame.set("caller", kv);
    }
    std::string out;
    in.exec_body(def->body, frame, out);
    return Value::string(std::move(out));
  }
};

// Unpacks `v` into `n` names (for / set targets).
List unpack(const Value& v, size_t n) {
  List parts = iterate(v);
  if (parts.size() < n)
    throw Error("not enough values to unpack (expected " + std::to_string(n) + ", got " + std::to_string(parts.size()) + ")");
  if (parts.size() > n) throw Error("too many values to unpack (expected " + std::to_string(n) + ")");
  return parts;
}

}  // namespace

void Interp::render(const ParsedTemplate& t, const Value& vars, std::string& out) {
  struct BreakCycles {
    ~BreakCycles() {
      for (const std::weak_ptr<void>& w : in.namespaces_) {
        if (std::shared_ptr<void> alive = w.lock()) {
          // Moved out first: destroying an entry may free another namespace of the list.
          Dict& d = *static_cast<Dict*>(alive.get());
          auto entries = std::move(d.entries);
          d.entries.clear();
        }
      }
      in.namespaces_.clear();
      in.prune_at_ = 64;
    }
    Interp& in;
  } break_cycles{*this};
  Frame frame;
  for (const auto& [k, v] : vars.dict_ref().entries) frame.vars.emplace_back(k, v);
  root_ = &frame;
  exec_body(t.body, frame, out);
  root_ = nullptr;
}

Interp::Flow Interp::exec_body(const Body& body, Frame& frame, std::string& out) {
  for (const NodePtr& n : body) {
    const Flow f = exec(*n, frame, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interp::Flow Interp::exec(const Node& n, Frame& frame, std::string& out) {
  step();
  try {
    switch (n.kind) {
      case NodeKind::kText:
        out += n.text;
        check_size(out.size());
        return Flow::kNormal;
      case NodeKind::kOutput: {
        const Value v = eval(*n.expr, frame);
        if (v.is_string()) out += v.str();
        else out += v.to_str();
        check_size(out.size());
        return Flow::kNormal;
      }
      case NodeKind::kIf: {
        DepthGuard guard(*this);
        for (const auto& [cond, body] : n.branches)
          if (eval(*cond, frame).truthy()) return exec_body(body, frame, out);
        return exec_body(n.else_body, frame, out);
      }
      case NodeKind::kFor: {
        DepthGuard guard(*this);
        return exec_for(n, frame, out);
      }
      case NodeKind::kSet: exec_set(n, frame); return Flow::kNormal;
      case NodeKind::kSetBlock: {
        std::string captured;
        {
          DepthGuard guard(*this);
          exec_body(n.body, frame, captured);
        }
        Value v = Value::string(std::move(captured));
        if (n.expr) v = eval_filter(*n.expr, frame, &v);
        frame.set(n.targets[0], std::move(v));
        return Flow::kNormal;
      }
      case NodeKind::kMacro: define_macro(n, frame); return Flow::kNormal;
      case NodeKind::kCallBlock: exec_call_block(n, frame, out); return Flow::kNormal;
      case NodeKind::kFilterBlock: {
        std::string captured;
        {
          DepthGuard guard(*this);
          exec_body(n.body, frame, captured);
        }
        const Value operand = Value::string(std::move(captured));
        out += eval_filter(*n.expr, frame, &operand).to_str();
        check_size(out.size());
        return Flow::kNormal;
      }
      case NodeKind::kBreak: return Flow::kBreak;
      case NodeKind::kContinue: return Flow::kContinue;
    }
  } catch (Error& e) {
    e.locate(n.line, n.column);
    throw;
  }
  return Flow::kNormal;
}

Interp::Flow Interp::exec_for(const Node& n, Frame& frame, std::string& out) {
  const Value iterable = eval(*n.expr, frame);
  if (!iterable.is_undefined() && !iterable.is_list() && !iterable.is_dict() && !iterable.is_string())
    throw Error(std::string("'") + iterable.type_name() + "' object is not iterable");
  List all = iterate(iterable);
  auto bind = [&](Frame& f, const Value& item) {
    if (n.targets.size() == 1) {
      f.set(n.targets[0], item);
      return;
    }
    List parts = unpack(item, n.targets.size());
    for (size_t k = 0; k < parts.size(); ++k) f.set(n.targets[k], std::move(parts[k]));
  };
  if (n.cond) {
    List kept;
    for (const Value& item : all) {
      step();
      Frame f;
      f.parent = &frame;
      bind(f, item);
      if (eval(*n.cond, f).truthy()) kept.push_back(item);
    }
    all = std::move(kept);
  }
  if (all.empty()) return exec_body(n.else_body, frame, out);
  auto loop = std::make_shared<LoopObject>();
  loop->items = &all;
  const Value loop_value = Value::callable(loop);
  for (size_t i = 0; i < all.size(); ++i) {
    Frame f;
    f.parent = &frame;
    f.vars.reserve(n.targets.size() + 4);
    loop->index = i;
    bind(f, all[i]);
    f.set("loop", loop_value);
    if (exec_body(n.body, f, out) == Flow::kBreak) break;
  }
  loop->items = nullptr;
  return Flow::kNormal;
}

void Interp::exec_set(const Node& n, Frame& frame) {
  Value v = eval(*n.expr, frame);
  if (n.attr_target) {
    Value* ns = frame.find(n.targets[0]);
    if (!ns || !ns->is_namespace()) throw Error("cannot assign attribute on non-namespace object");
    ns->dict_mut().set(n.targets[1], std::move(v));
    return;
  }
  if (n.targets.size() == 1) {
    frame.set(n.targets[0], std::move(v));
    return;
  }
  List parts = unpack(v, n.targets.size());
  for (size_t k = 0; k < parts.size(); ++k) frame.set(n.targets[k], std::move(parts[k]));
}

void Interp::define_macro(const Node& n, Frame& frame) {
  auto m = std::make_shared<MacroFn>();
  m->def = &n;
  m->scope = root_;
  frame.set(n.name, Value::callable(std::move(m)));
}

void Interp::exec_call_block(const Node& n, Frame& frame, std::string& out) {
  auto caller = std::make_shared<MacroFn>();
  caller->def = &n;
  caller->scope = &frame;
  caller->is_caller = true;
  const Expr& call = *n.expr;
  const Value callee = eval(*call.items[0], frame);
  CallArgs args;
  eval_args(call, frame, args, 1);
  args.kw.emplace_back("caller", Value::callable(caller));
  out += this->call(callee, args).to_str();
  check_size(out.size());
}

void Interp::eval_args(const Expr& e, Frame& frame, CallArgs& args, size_t first) {
  args.pos.reserve(e.items.size() - first);
  for (size_t k = first; k < e.items.size(); ++k) args.pos.push_back(eval(*e.items[k], frame));
  for (const auto& [name, ex] : e.kwargs) args.kw.emplace_back(name, eval(*ex, frame));
}

Value Interp::eval(const Expr& e, Frame& frame) {
  step();
  try {
    return eval_inner(e, frame);
  } catch (Error& err) {
    err.locate(e.line, e.column);
    throw;
  }
}

Value Interp::eval_inner(const Expr& e, Frame& frame) {
  switch (e.kind) {
    case ExprKind::kLiteral: return e.literal;
    case ExprKind::kName: {
      if (Value* v = frame.find(e.name)) return *v;
      Value g = find_global(e.name);
      if (!g.is_undefined()) return g;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      items.reserve(e.items.size());
      for (const ExprPtr& x : e.items) items.push_back(eval(*x, frame));
      return Value::list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Value d = Value::new_dict();
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        const Value key = eval(*e.items[k], frame);
        if (!key.is_string()) throw Error(std::string("unsupported: dict keys of type '") + key.type_name() + "'");
        d.dict_mut().set(key.str(), eval(*e.items[k + 1], frame));
      }
      d.update_depth();
      return d;
    }
    case ExprKind::kGetAttr: return getattr(eval(*e.items[0], frame), e.name);
    case ExprKind::kGetItem: {
      const Value obj = eval(*e.items[0], frame);
      return getitem(obj, eval(*e.items[1], frame));
    }
    case ExprKind::kSlice: {
      const Value obj = eval(*e.items[0], frame);
      Value b[3];
      for (int k = 0; k < 3; ++k)
        if (e.items[k + 1]) b[k] = eval(*e.items[k + 1], frame);
      return slice_value(obj, b[0], b[1], b[2]);
    }
    case ExprKind::kCall: return eval_call(e, frame);
    case ExprKind::kFilter: return eval_filter(e, frame, nullptr);
    case ExprKind::kTest: {
      const Value v = eval(*e.items[0], frame);
      CallArgs args;
      eval_args(e, frame, args, 1);
      return Value::boolean(e.test(*this, v, args) != e.negated);
    }
    case ExprKind::kNot: return Value::boolean(!eval(*e.items[0], frame).truthy());
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      const Value v = eval(*e.items[0], frame);
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) throw Error(std::string("bad operand type for unary ") + (e.kind == ExprKind::kNeg ? "-" : "+") + ": '" + v.type_name() + "'");
      if (e.kind == ExprKind::kPos) return v.is_float() ? v : Value::integer(v.as_int());
      if (v.is_float()) return Value::real(-v.as_float());
      if (v.as_int() == INT64_MIN) throw Error("integer overflow (beyond 64 bits)");
      return Value::integer(-v.as_int());
    }
    case ExprKind::kBinary: {
      const Value a = eval(*e.items[0], frame);
      return binary_op(*this, e.name, a, eval(*e.items[1], frame));
    }
    case ExprKind::kAnd: {
      Value a = eval(*e.items[0], frame);
      return a.truthy() ? eval(*e.items[1], frame) : a;
    }
    case ExprKind::kOr: {
      Value a = eval(*e.items[0], frame);
      return a.truthy() ? a : eval(*e.items[1], frame);
    }
    case ExprKind::kCompare: return eval_compare(e, frame);
    case ExprKind::kConcat: {
      std::string s;
      for (const ExprPtr& x : e.items) {
        const Value v = eval(*x, frame);
        s += v.is_string() ? v.str() : v.to_str();
        check_size(s.size());
      }
      return Value::string(std::move(s));
    }
    case ExprKind::kCondExpr:
      if (eval(*e.items[0], frame).truthy()) return eval(*e.items[1], frame);
      if (e.items[2]) return eval(*e.items[2], frame);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  throw Error("unknown expression kind");
}

Value Interp::eval_compare(const Expr& e, Frame& frame) {
  Value left = eval(*e.items[0], frame);
  for (size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.items[k + 1], frame);
    const std::string& op = e.ops[k];
    bool r;
    if (op == "==") r = equals(left, right);
    else if (op == "!=") r = !equals(left, right);
    else if (op == "<") r = less_than(left, right);
    else if (op == ">") r = less_than(right, left);
    else if (op == "<=") r = less_than(left, right) || equals(left, right);
    else if (op == ">=") r = less_than(right, left) || equals(left, right);
    else if (op == "in") r = contains(right, left);
    else r = !contains(right, left);  // notin
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interp::eval_call(const Expr& e, Frame& frame) {
  const Value callee = eval(*e.items[0], frame);
  CallArgs args;
  eval_args(e, frame, args, 1);
  return call(callee, args);
}

Value Interp::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_callable()) throw Error(std::string("'") + callee.type_name() + "' object is not callable");
  DepthGuard guard(*this);
  return callee.fn().call(*this, args);
}

Value Interp::eval_filter(const Expr& e, Frame& frame, const Value* block_operand) {
  Value operand;
  if (!e.items[0]) operand = *block_operand;
  else if (e.items[0]->kind == ExprKind::kFilter && block_operand) operand = eval_filter(*e.items[0], frame, block_operand);
  else operand = eval(*e.items[0], frame);
  CallArgs args;
  eval_args(e, frame, args, 1);
  return e.filter(*this, operand, args);
}

Value Interp::getattr(const Value& obj, std::string_view attr) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: fail_undefined(obj);
    case Value::Kind::kDict: {
      Value m = bound_method(obj, attr);
      if (!m.is_undefined()) return m;
      if (const Value* v = obj.dict_ref().find(attr)) return *v;
      break;
    }
    case Value::Kind::kNamespace:
      if (const Value* v = obj.dict_ref().find(attr)) return *v;
      break;
    case Value::Kind::kCallable: {
      Value v = obj.fn().getattr(*this, attr);
      if (!v.is_undefined() || !v.str().empty()) return v;
      break;
    }
    case Value::Kind::kString:
    case Value::Kind::kList: {
      Value m = bound_method(obj, attr);
      if (!m.is_undefined() || !m.str().empty()) return m;
      break;
    }
    default: break;
  }
  return Value::undefined(object_desc(obj) + " has no attribute '" + std::string(attr) + "'");
}

Value Interp::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: fail_undefined(obj);
    case Value::Kind::kDict:
      if (key.is_string()) {
        if (const Value* v = obj.dict_ref().find(key.str())) return *v;
        Value m = bound_method(obj, key.str());
        if (!m.is_undefined() || !m.str().empty()) return m;
      }
      break;
    case Value::Kind::kList:
      if (key.is_number() && !key.is_float()) {
        int64_t i = key.as_int();
        const int64_t n = static_cast<int64_t>(obj.items().size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.items()[i];
        return Value::undefined(object_desc(obj) + " has no element " + key.to_str());
      }
      if (key.is_string()) return getattr(obj, key.str());
      break;
    case Value::Kind::kString:
      if (key.is_number() && !key.is_float()) {
        Value one = Value::integer(1);
        int64_t i = key.as_int();
        if (i < 0) i += py_len(obj);
        Value s = slice_value(obj, Value::integer(i), Value::integer(i + 1), Value());
        if (!s.str().empty() && i >= 0) return s;
        return Value::undefined(object_desc(obj) + " has no element " + key.to_str());
      }
      if (key.is_string()) return getattr(obj, key.str());
      break;
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable:
      if (key.is_string()) return getattr(obj, key.str());
      break;
    default: break;
  }
  if (key.is_string()) return Value::undefined(object_desc(obj) + " has no attribute '" + key.str() + "'");
  return Value::undefined(object_desc(obj) + " has no element " + key.repr());
}

}  // namespace densa::jinja
