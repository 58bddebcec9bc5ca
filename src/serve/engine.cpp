#include "fucina/serve/engine.hpp"

#include <chrono>

#include "fucina/core/error.hpp"

namespace fucina::serve {

SerialEngine::SerialEngine(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx,
                           const EngineOptions& options)
    : generator_(model, tok, ctx, options.generator),
      capacity_(static_cast<std::size_t>(options.slots) + static_cast<std::size_t>(options.max_queue)) {
  FUCINA_CHECK(options.slots >= 1 && options.max_queue >= 0, InvalidArgument,
               "[serve] slots must be at least 1 and max_queue at least 0, got {} and {}", options.slots,
               options.max_queue);
  thread_ = std::thread([this] { loop(); });
}

SerialEngine::~SerialEngine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_flag_ = true;
  wake_.notify_all();
  thread_.join();
}

bool SerialEngine::submit(std::vector<Job> jobs) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || waiting_.size() + (running_ ? 1 : 0) + jobs.size() > capacity_) return false;
    for (auto& j : jobs) waiting_.push_back(std::move(j));
  }
  wake_.notify_one();
  return true;
}

EngineStats SerialEngine::stats() const {
  std::lock_guard lock(mutex_);
  EngineStats s = totals_;
  s.waiting = static_cast<std::int64_t>(waiting_.size());
  s.running = running_ ? 1 : 0;
  return s;
}

void SerialEngine::loop() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
      if (waiting_.empty()) return;  // stopping
      job = std::move(waiting_.front());
      waiting_.pop_front();
      running_ = true;
    }
    run(job);
    std::lock_guard lock(mutex_);
    running_ = false;
  }
}

void SerialEngine::run(Job& job) {
  JobOutcome out;
  out.result.reason = generate::StopReason::Cancelled;
  const bool cancelled = stop_flag_ || (job.request.cancel && job.request.cancel->load());
  const auto t0 = std::chrono::steady_clock::now();
  if (!cancelled) {
    try {
      out.prompt_tokens = static_cast<std::int64_t>(job.prompt.size());
      generator_.feed_prompt(job.prompt);
      // The engine's stop flag cancels too: a cancel flag of the job's own is read as well.
      const std::atomic<bool>* own = job.request.cancel;
      std::atomic<bool> either{false};
      generate::Request request = job.request;
      request.cancel = &either;
      auto on_step = std::move(request.on_step);
      request.on_step = [&](const generate::Step& step) {
        if (stop_flag_ || (own && own->load())) either = true;
        if (on_step) on_step(step);
      };
      out.result = generator_.generate(request);
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  }
  {
    std::lock_guard lock(mutex_);
    totals_.jobs_done += 1;
    if (!cancelled && out.error.empty()) {
      totals_.prompt_tokens += out.result.timings.prompt_tokens;
      totals_.generated_tokens += out.result.timings.gen_tokens;
      totals_.busy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  if (job.on_done) job.on_done(out);
}

}  // namespace fucina::serve
