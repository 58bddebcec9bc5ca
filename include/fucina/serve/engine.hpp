#pragma once
// The server's scheduler: it owns the generation slots and runs the jobs the HTTP layer
// submits. The HTTP layer sees only Engine, so a continuous-batching engine (many sequences
// stepped in one forward pass, issue 20) replaces SerialEngine without touching it.
//
// Note [Serial engine]
// SerialEngine is the first Engine: one Generator (one KV cache) on one thread runs the jobs
// in arrival order, one at a time. `slots` is admission only: up to slots + max_queue jobs
// are admitted (running or waiting), but they run one after another. Consecutive jobs share
// the Generator, so a prompt that starts like the previous one (a system prompt, the next
// turn of a chat) reuses the cached prefix (Note [Generation loop]). A job whose cancel flag
// is set while it waits is dropped when it comes up (its on_done still runs); a running job
// stops before its next token.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fucina/generate/generator.hpp"

namespace fucina::serve {

struct JobOutcome {
  generate::Result result;  // reason Cancelled when dropped before it ran
  std::int64_t prompt_tokens = 0;
  std::string error;  // non-empty: the job failed (the prompt did not fit, ...)
};

// One completion: the prompt's tokens and the generation request (sampling, stops, cancel
// flag, per-token callback). on_done runs once, on the engine's thread, after the last step.
struct Job {
  std::vector<tokenizer::TokenId> prompt;
  generate::Request request;
  std::function<void(const JobOutcome&)> on_done;
};

struct EngineStats {
  std::int64_t waiting = 0, running = 0;  // jobs now
  std::int64_t jobs_done = 0, prompt_tokens = 0, generated_tokens = 0;  // totals
  double busy_seconds = 0;  // total time spent generating
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Admits all of `jobs` (the choices of one request) or, when there is no room, none.
  virtual bool submit(std::vector<Job> jobs) = 0;
  virtual EngineStats stats() const = 0;
  virtual std::int64_t context_length() const = 0;  // tokens one sequence may hold
};

struct EngineOptions {
  int slots = 1;      // --parallel
  int max_queue = 64; // jobs admitted beyond the slots
  generate::GeneratorOptions generator{};
};

class SerialEngine final : public Engine {
 public:
  // model, tok and ctx must outlive the engine.
  SerialEngine(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx, const EngineOptions& options);
  // Stops the thread: the running job is cancelled, waiting ones end Cancelled.
  ~SerialEngine() override;

  bool submit(std::vector<Job> jobs) override;
  EngineStats stats() const override;
  std::int64_t context_length() const override { return generator_.cache().capacity(); }

 private:
  void loop();
  void run(Job& job);

  generate::Generator generator_;
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> waiting_;
  bool running_ = false, stopping_ = false;
  std::atomic<bool> stop_flag_{false};
  EngineStats totals_;
  std::thread thread_;
};

}  // namespace fucina::serve
