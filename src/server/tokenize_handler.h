#pragma once
// POST /tokenize and POST /detokenize, in vLLM's request and response shapes, for debugging
// what the model sees: the ids of a prompt (or of a chat conversation rendered with the
// model's template) and the text of a list of ids.
#include <httplib.h>

#include "server/serving_context.h"

namespace densa::server {

void register_tokenize_routes(httplib::Server& http, ServingContext& ctx);

}  // namespace densa::server
