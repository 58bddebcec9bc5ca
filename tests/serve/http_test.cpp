// The HTTP layer over a scripted Engine (no model runs): what a client receives for tool
// calls, plain and streamed, and /health before and after the model is there. Also shows
// that the layer needs nothing of an Engine but its interface.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <string>
#include <thread>
#include <unistd.h>

#include "fucina/model/model.hpp"
#include "fucina/model/synth.hpp"
#include "fucina/serve/protocol.hpp"
#include "fucina/serve/server.hpp"

namespace fucina::serve {
namespace {

// Replies to every job with `reply`, a few bytes per step, then an end-of-generation token.
class ScriptedEngine final : public Engine {
 public:
  explicit ScriptedEngine(std::string reply) : reply_(std::move(reply)) {}
  bool submit(std::vector<Job> jobs) override {
    for (auto& job : jobs) {
      JobOutcome out;
      out.prompt_tokens = static_cast<std::int64_t>(job.prompt.size());
      for (std::size_t i = 0; i < reply_.size(); i += 3) {
        const std::string piece = reply_.substr(i, 3);
        job.request.on_step({.token = 5, .text = piece, .logits = {}});
        out.result.tokens.push_back(5);
      }
      job.request.on_step({.token = tokenizer::null_token, .text = {}, .logits = {}});
      out.result.text = reply_;
      out.result.reason = generate::StopReason::Eos;
      job.on_done(out);
    }
    return true;
  }
  EngineStats stats() const override { return {}; }
  std::int64_t context_length() const override { return 4096; }

 private:
  std::string reply_;
};

class ServeHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("fucina_serve_http_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model::write_synthetic_model(dir_ / "m.gguf", model::SynthSpec{});
    model_ = new model::Model(model::Model::load(dir_ / "m.gguf"));
    tok_ = new tokenizer::Tokenizer(tokenizer::load_tokenizer_data(model_->file()));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete model_;
    std::filesystem::remove_all(dir_);
  }

  void start() {
    port_ = server_.bind();
    thread_ = std::thread([this] { server_.run(); });
  }
  void serve(Engine& engine, std::string tmpl = "<tool_call>") {
    server_.set_backend({.model_id = "m", .tok = tok_, .chat_template = std::move(tmpl), .engine = &engine});
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Result post(const std::string& path, const json& body) {
    httplib::Client cli("127.0.0.1", port_);
    return cli.Post(path.c_str(), body.dump(), "application/json");
  }

  static inline std::filesystem::path dir_;
  static inline model::Model* model_ = nullptr;
  static inline tokenizer::Tokenizer* tok_ = nullptr;
  static ServerOptions any_port() {
    ServerOptions o;
    o.port = 0;
    return o;
  }
  Server server_{any_port()};
  int port_ = 0;
  std::thread thread_;
};

const json k_tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
const std::string k_reply = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";

json chat(bool tools, bool stream) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Weather in Rome?"}}}}, {"stream", stream}};
  if (tools) body["tools"] = k_tools;
  return body;
}

TEST_F(ServeHttp, HealthIs503UntilTheModelIsThere) {
  start();
  httplib::Client cli("127.0.0.1", port_);
  auto loading = cli.Get("/health");
  ASSERT_TRUE(loading);
  EXPECT_EQ(loading->status, 503);
  EXPECT_EQ(json::parse(loading->body)["error"]["code"], "loading");
  auto early = post("/v1/chat/completions", chat(false, false));
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 503);
  EXPECT_TRUE(early->has_header("Retry-After"));
  ScriptedEngine engine("hi");
  serve(engine);
  auto ok = cli.Get("/health");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body), json({{"status", "ok"}}));
}

TEST_F(ServeHttp, ToolCallsComeBackAsToolCalls) {
  ScriptedEngine engine(k_reply);
  serve(engine);
  start();
  auto res = post("/v1/chat/completions", chat(true, false));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json choice = json::parse(res->body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Sure.");
  const json call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), json({{"city", "Rome"}}));
  // Without tools the same text is only text.
  auto plain = post("/v1/chat/completions", chat(false, false));
  ASSERT_TRUE(plain);
  const json p = json::parse(plain->body)["choices"][0];
  EXPECT_EQ(p["finish_reason"], "stop");
  EXPECT_EQ(p["message"]["content"], k_reply);
  EXPECT_FALSE(p["message"].contains("tool_calls"));
}

TEST_F(ServeHttp, StreamedToolCalls) {
  ScriptedEngine engine(k_reply);
  serve(engine);
  start();
  auto res = post("/v1/chat/completions", chat(true, true));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  std::vector<json> chunks;
  std::size_t pos = 0;
  while ((pos = res->body.find("data: ", pos)) != std::string::npos) {
    const auto end = res->body.find("\n\n", pos);
    const std::string payload = res->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") break;
    chunks.push_back(json::parse(payload));
  }
  ASSERT_EQ(chunks.size(), 3u) << res->body;  // role, content + calls, finish
  EXPECT_EQ(res->body.substr(res->body.size() - 14), "data: [DONE]\n\n");
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  const json delta = chunks[1]["choices"][0]["delta"];
  EXPECT_EQ(delta["content"], "Sure.");
  EXPECT_EQ(delta["tool_calls"][0]["index"], 0);
  EXPECT_EQ(delta["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(chunks[2]["choices"][0]["finish_reason"], "tool_calls");
}

}  // namespace
}  // namespace fucina::serve
