#include "fucina/serve/engine.hpp"

#include <algorithm>
#include <chrono>

#include "fucina/core/error.hpp"

namespace fucina::serve {

namespace {
generate::BatchOptions batch_options(const EngineOptions& o) {
  FUCINA_CHECK(o.slots >= 1 && o.max_queue >= 0, InvalidArgument,
               "[serve] slots must be at least 1 and max_queue at least 0, got {} and {}", o.slots, o.max_queue);
  generate::BatchOptions b = o.batch;
  b.n_parallel = o.slots;
  b.n_batch = std::max(b.n_batch, b.n_parallel);  // a decode row for every sequence fits a step
  b.keep_finished = b.n_parallel;                  // as llama-server's slots keep their last prompt
  return b;
}
}  // namespace

BatchEngine::BatchEngine(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx,
                         const EngineOptions& options)
    : model_(model),
      tok_(tok),
      ctx_(ctx),
      options_(batch_options(options)),
      batch_(std::in_place, model, tok, ctx, options_),
      context_length_(batch_->cache().capacity()),
      capacity_(static_cast<std::size_t>(options.slots) + static_cast<std::size_t>(options.max_queue)) {
  totals_.kv_blocks_total = totals_.kv_blocks_free = batch_->cache().total_blocks();
  thread_ = std::thread([this] { loop(); });
}

BatchEngine::~BatchEngine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool BatchEngine::submit(std::vector<Job> jobs) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || admitted_ + jobs.size() > capacity_) return false;
    admitted_ += jobs.size();
    totals_.waiting += static_cast<std::int64_t>(jobs.size());
    for (auto& j : jobs) submitted_.push_back(std::move(j));
  }
  wake_.notify_one();
  return true;
}

EngineStats BatchEngine::stats() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

void BatchEngine::end(Job& job, const JobOutcome& outcome) {
  {
    std::lock_guard lock(mutex_);
    --admitted_;
    totals_.jobs_done += 1;
    totals_.prompt_tokens += outcome.result.timings.prompt_tokens;
    totals_.generated_tokens += outcome.result.timings.gen_tokens;
    totals_.drafted_tokens += outcome.result.timings.drafted;
    totals_.accepted_tokens += outcome.result.timings.accepted;
  }
  if (job.on_done) job.on_done(outcome);
}

void BatchEngine::loop() {
  std::unordered_map<std::size_t, Job> active;  // by BatchGenerator request index
  while (true) {
    std::deque<Job> incoming;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !submitted_.empty() || !active.empty(); });
      if (stopping_) break;
      incoming.swap(submitted_);
    }
    for (Job& job : incoming) {
      JobOutcome outcome{.result = {}, .prompt_tokens = static_cast<std::int64_t>(job.prompt.size()), .error = {}};
      try {
        const std::size_t i = batch_->add(job.prompt, std::move(job.request));
        active.emplace(i, std::move(job));
        continue;
      } catch (const std::exception& e) {
        outcome.error = e.what();
      }
      end(job, outcome);
    }
    step(active);
  }
  // Stopping: whatever has not finished ends Cancelled.
  std::unique_lock lock(mutex_);
  std::deque<Job> rest;
  rest.swap(submitted_);
  lock.unlock();
  for (auto& [i, job] : active) rest.push_back(std::move(job));
  for (Job& job : rest) {
    JobOutcome outcome;
    outcome.result.reason = generate::StopReason::Cancelled;
    end(job, outcome);
  }
}

void BatchEngine::step(std::unordered_map<std::size_t, Job>& active) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string error;
  bool stepped = false;
  try {
    stepped = batch_->step();
  } catch (const std::exception& e) {
    error = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!error.empty()) {
    // A failed forward leaves the sequences in no known state: every job fails with it and
    // the engine starts over with an empty cache.
    batch_.reset();
    batch_.emplace(model_, tok_, ctx_, options_);
    for (auto& [i, job] : active) end(job, {.result = {}, .prompt_tokens = static_cast<std::int64_t>(job.prompt.size()), .error = error});
    active.clear();
  }
  for (auto it = active.begin(); it != active.end();) {
    if (!batch_->finished(it->first)) {
      ++it;
      continue;
    }
    end(it->second, {.result = batch_->release(it->first),
                     .prompt_tokens = static_cast<std::int64_t>(it->second.prompt.size()),
                     .error = {}});
    it = active.erase(it);
  }
  std::lock_guard lock(mutex_);
  totals_.busy_seconds += seconds;
  totals_.steps += stepped ? 1 : 0;
  totals_.running = batch_->running();
  totals_.waiting = static_cast<std::int64_t>(active.size() + submitted_.size()) - totals_.running;
  totals_.kv_blocks_free = batch_->cache().free_blocks();
}

}  // namespace fucina::serve
