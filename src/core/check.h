#pragma once
// CHECK for programmer invariants: on failure prints file:line, the condition and any streamed
// context, then aborts. DCHECK compiles away in release builds (NDEBUG).
#include <sstream>

namespace densa::detail {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `CHECK(c) << ...` be a single expression of type void.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace densa::detail

#define CHECK(cond) \
  (cond) ? (void)0 : ::densa::detail::Voidify() & ::densa::detail::CheckFailure(__FILE__, __LINE__, #cond)

#ifdef NDEBUG
#define DCHECK(cond) \
  true ? (void)0 : ::densa::detail::Voidify() & ::densa::detail::CheckFailure(__FILE__, __LINE__, #cond)
#else
#define DCHECK(cond) CHECK(cond)
#endif
