#include "text/jinja/template.h"

#include <exception>
#include <new>

#include "text/jinja/ast.h"
#include "text/jinja/internal.h"

namespace densa::jinja {
namespace {

std::string where(const Error& e) {
  if (e.line() == 0) return {};
  return " (template line " + std::to_string(e.line()) + ", column " + std::to_string(e.column()) + ")";
}

}  // namespace

Result<Template> Template::parse(std::string_view source) {
  try {
    Template t;
    t.parsed_ = parse_template(source);
    return t;
  } catch (const Error& e) {
    return invalid_argument("chat template syntax error: " + e.message() + where(e));
  } catch (const std::bad_alloc&) {
    return resource_exhausted("chat template: out of memory while parsing");
  } catch (const std::exception& e) {
    // A bug (every template error is an Error): reported, never a crash of the server.
    return Status(StatusCode::kInternal, std::string("chat template parser: internal error: ") + e.what());
  }
}

Result<std::string> Template::render(const nlohmann::ordered_json& vars, const RenderLimits& limits) const {
  if (!parsed_) return invalid_argument("rendering an unparsed template");
  if (!vars.is_object()) return invalid_argument("template variables must be a JSON object");
  try {
    Interp in(limits);
    const Value context = Value::from_json(vars);
    std::string out;
    in.render(*parsed_, context, out);
    return out;
  } catch (const Error& e) {
    switch (e.kind()) {
      case Error::Kind::kRaised: return invalid_argument("chat template raised an exception: " + e.message() + where(e));
      case Error::Kind::kLimit: return resource_exhausted("chat template: " + e.message() + where(e));
      case Error::Kind::kTemplate: break;
    }
    return invalid_argument("chat template error: " + e.message() + where(e));
  } catch (const std::bad_alloc&) {
    return resource_exhausted("chat template: out of memory while rendering");
  } catch (const std::exception& e) {
    // A bug (the limits and every template error are Errors): reported, never a crash.
    return Status(StatusCode::kInternal, std::string("chat template: internal error: ") + e.what());
  }
}

Result<std::string> Template::render(const nlohmann::json& vars, const RenderLimits& limits) const {
  return render(nlohmann::ordered_json::parse(vars.dump()), limits);
}

}  // namespace densa::jinja
