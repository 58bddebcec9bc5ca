#pragma once
// The server's scheduler: it owns the generation slots and runs the jobs the HTTP layer
// submits. The HTTP layer sees only Engine (its tests script one of their own).
//
// Note [Batch engine]
// BatchEngine is continuous batching (Note [Continuous batching] in batch_generator.hpp)
// behind a queue: one thread owns a BatchGenerator and loops { take the jobs submitted
// since the last step, add them; step(); hand every finished job its outcome }. Up to
// `slots` jobs run at once, one forward pass per step serving all of them; up to
// slots + max_queue jobs are admitted (running or waiting), the rest refused. Each token
// reaches its job through the request's step callback, on the engine's thread, as the step
// that sampled it ends. A job's cancel flag (the client left, its timeout passed) is read at
// every step, so a cancelled job's sequence ends, and its KV blocks are free, by the next
// step, whether it was queued, reading its prompt or generating. Finished jobs are released
// from the BatchGenerator (Note [Long-running batches]): a server that runs for days holds
// only its current jobs and the KV of the last `slots` finished ones (Note [Kept prefixes],
// as llama-server's slots keep their last prompt). A job whose prompt starts with at least
// one KV block of a running or kept sequence (the choices of one request, a system prompt
// sent again, a chat's next turn) forks it instead of running it again.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fucina/generate/batch_generator.hpp"

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
  std::int64_t drafted_tokens = 0, accepted_tokens = 0;  // speculative decoding (Note [Speculative batches])
  std::int64_t steps = 0;   // BatchGenerator steps: generated_tokens / steps is the batch at work
  double busy_seconds = 0;  // total time spent stepping
  std::int64_t kv_blocks_total = 0, kv_blocks_free = 0;  // the shared KV budget now
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
  int slots = 1;       // --parallel: sequences running at once
  int max_queue = 64;  // jobs admitted beyond the slots
  // Per sequence (n_ctx), tokens per step (n_batch), KV type; n_parallel is `slots`.
  generate::BatchOptions batch{};
};

class BatchEngine final : public Engine {
 public:
  // model, tok and ctx must outlive the engine.
  BatchEngine(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx, const EngineOptions& options);
  // Stops the thread; jobs not finished end Cancelled (their on_done runs).
  ~BatchEngine() override;

  bool submit(std::vector<Job> jobs) override;
  EngineStats stats() const override;
  std::int64_t context_length() const override { return context_length_; }

 private:
  void loop();
  void step(std::unordered_map<std::size_t, Job>& active);
  void end(Job& job, const JobOutcome& outcome);

  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  Context& ctx_;
  const generate::BatchOptions options_;
  std::optional<generate::BatchGenerator> batch_;  // the engine thread's only
  const std::int64_t context_length_;
  const std::size_t capacity_;  // jobs admitted at once
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> submitted_;  // not yet handed to batch_
  std::size_t admitted_ = 0;   // submitted, on_done not yet run
  bool stopping_ = false;
  EngineStats totals_;
  std::thread thread_;
};

}  // namespace fucina::serve
