#pragma once
// `fucina serve`'s HTTP layer (cpp-httplib): the OpenAI-compatible endpoints, API key,
// body limit, queue admission (429), per-request timeout, SSE streaming with cancellation
// when the client goes away, /metrics and one log line per request. It knows the model only
// through Backend, and generation only through Engine. Endpoints and flags: docs/SERVER.md.
#include <cstddef>
#include <memory>
#include <string>

#include "fucina/serve/engine.hpp"
#include "fucina/tokenizer/tokenizer.hpp"

namespace fucina::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (bind() says which)
  std::string api_key;              // empty: no key asked
  std::size_t max_body = 8u << 20;  // request body bytes; more is a 413
  double timeout_seconds = 600;     // per request, queueing included
  int http_threads = 8;             // connections served at once
};

// The loaded model as the endpoints use it; pointers outlive the Server.
struct Backend {
  std::string model_id;  // /v1/models' id and every response's "model"
  const tokenizer::Tokenizer* tok = nullptr;
  std::string chat_template;  // the template's source (the GGUF's, a file's, or ChatML)
  Engine* engine = nullptr;
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket; returns the port. Throws Error(Io) when it cannot.
  int bind();
  // Serves until stop(); model endpoints answer 503 until set_backend().
  void run();
  void set_backend(Backend backend);  // thread-safe
  void stop();                        // thread-safe

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fucina::serve
