#pragma once
// Byte sizes as people write them on command lines: "80GiB", "141G", "141GB", "1.5TiB",
// "4096". K/M/G/T are powers of 1000, Ki/Mi/Gi/Ti of 1024; a trailing B is optional.
#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace densa {

// invalid_argument for anything else (no number, a negative one, an unknown unit);
// out_of_range past 9e18 bytes.
Result<int64_t> parse_byte_size(std::string_view text);

}  // namespace densa
