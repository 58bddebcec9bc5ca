#include "fucina/model/expert_store.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <unordered_map>

namespace fucina::model {

ExpertFfn resident_expert(const LayerWeights& w, std::int64_t e) {
  return {w.gate_exps.expert(e), w.up_exps.expert(e), w.down_exps.expert(e)};
}

bool is_routed_expert_tensor(std::string_view name) {
  return name.starts_with("blk.") &&
         (name.ends_with(".ffn_gate_exps.weight") || name.ends_with(".ffn_up_exps.weight") ||
          name.ends_with(".ffn_down_exps.weight"));
}

namespace {

constexpr std::uint64_t io_align = 4096;  // O_DIRECT: offsets, lengths and buffers
std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

enum class SlotState { empty, loading, ready };

}  // namespace

struct ExpertStore::Impl {
  // One matrix of one layer's stack: where expert e's rows start in the file.
  struct Part {
    gguf::TensorInfo info;
    std::uint64_t file_offset = 0;  // expert 0
    std::uint64_t bytes = 0;        // one expert
  };
  // What a slot's borrowed buffers call on release (one per slot, stable address).
  struct Handle {
    Impl* impl;
    std::size_t slot;
  };
  struct Slot {
    std::byte* base = nullptr;  // part p at base + part_start[p]
    std::int64_t key = -1;      // layer · n_expert + expert
    SlotState state = SlotState::empty;
    int refs = 0;  // live borrowed buffers
    std::uint64_t last_use = 0, uses = 0;
    bool guessed = false;  // read on the next-layer guess and not fetched since
    std::array<const std::byte*, 3> data{};  // where each part's bytes begin (after O_DIRECT's lead)
    Handle handle{};
  };

  std::filesystem::path path;
  std::optional<gguf::Reader> file;  // keeps the TensorInfo names alive
  ModelConfig config;
  std::vector<Weight<"expert", "embd">> routers;
  LoadOptions options;
  std::vector<std::array<Part, 3>> layers;  // gate, up, down
  std::array<std::uint64_t, 3> part_start{};
  std::uint64_t slot_bytes = 0, expert_bytes = 0;
  int fd = -1, direct_fd = -1;
  void* pool = nullptr;
  std::size_t pool_bytes = 0;
  std::vector<Slot> slots;
  std::unordered_map<std::int64_t, std::size_t> index;  // key -> slot
  double freq_weight = 1;
  std::size_t hot_slots = 0;                       // a quarter of the slots
  mutable std::vector<std::uint64_t> use_counts;  // victim's scratch

  mutable std::mutex m;
  std::condition_variable cv;
  std::uint64_t clock = 0, hint_clock = 0;
  struct Wanted {
    std::int64_t key;
    bool guess;  // the next layer's, from its router
  };
  std::deque<Wanted> queue;  // to prefetch
  bool stop = false;
  ExpertStoreStats stats;
  std::thread reader;

  ~Impl() {
    {
      std::lock_guard lk(m);
      stop = true;
    }
    cv.notify_all();
    if (reader.joinable()) reader.join();
    if (pool) ::munmap(pool, pool_bytes);
    if (fd >= 0) ::close(fd);
    if (direct_fd >= 0) ::close(direct_fd);
  }

  // The slot to reuse: empty first, then the lowest priority among unpinned ready slots
  // (those last used before `not_after` only, for the prefetcher), hot slots last; -1 when
  // none. Hot (Note [Streamed experts]): more uses than the hot_slots-th most used ready
  // slot, and at least 2, so fewer than hot_slots slots are hot and a cold one is preferred.
  std::int64_t victim(std::uint64_t not_after) const {
    std::uint64_t hot_above = ~std::uint64_t{0};
    if (hot_slots > 0) {
      use_counts.clear();
      for (const Slot& s : slots)
        if (s.state == SlotState::ready) use_counts.push_back(s.uses);
      if (use_counts.size() >= hot_slots) {
        const auto kth = use_counts.begin() + static_cast<std::ptrdiff_t>(hot_slots - 1);
        std::nth_element(use_counts.begin(), kth, use_counts.end(), std::greater<>());
        hot_above = std::max<std::uint64_t>(*kth, 1);
      }
    }
    std::int64_t best = -1;
    double best_p = 0;
    bool best_hot = true;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const Slot& s = slots[i];
      if (s.state == SlotState::empty) return static_cast<std::int64_t>(i);
      if (s.state != SlotState::ready || s.refs > 0 || s.last_use >= not_after) continue;
      const bool hot = s.uses > hot_above;
      const double p = static_cast<double>(s.last_use) + freq_weight * std::log2(1.0 + static_cast<double>(s.uses));
      if (best < 0 || (best_hot && !hot) || (hot == best_hot && p < best_p))
        best = static_cast<std::int64_t>(i), best_p = p, best_hot = hot;
    }
    return best;
  }

  // Claims slot i for `key` (caller holds m): the old expert leaves the index.
  void claim(std::size_t i, std::int64_t key) {
    Slot& s = slots[i];
    if (s.key >= 0) index.erase(s.key);
    s.key = key;
    s.state = SlotState::loading;
    s.uses = 0;
    s.guessed = false;
    index[key] = i;
  }

  // Reads `len` bytes at `off` into `dst` (a slot part); returns where they begin in dst.
  const std::byte* read_part(std::byte* dst, std::uint64_t off, std::uint64_t len) {
    std::uint64_t from = off, n = len, lead = 0;
    int f = fd;
    if (direct_fd >= 0) {
      from = off / io_align * io_align;
      lead = off - from;
      n = round_up(lead + len, io_align);
      f = direct_fd;
    }
    std::uint64_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(f, dst + got, static_cast<std::size_t>(n - got), static_cast<off_t>(from + got));
      if (r < 0 && errno == EINTR) continue;
      FUCINA_CHECK(r >= 0, Io, "[moe-stream] cannot read experts from '{}': {}", path.string(), std::strerror(errno));
      if (r == 0) break;
      got += static_cast<std::uint64_t>(r);
    }
    FUCINA_CHECK(got >= lead + len, Io, "[moe-stream] '{}' ends inside an expert (at byte {})", path.string(), from + got);
    // Advice: a failure only leaves the pages cached.
    if (direct_fd < 0) (void)::posix_fadvise(fd, static_cast<off_t>(off), static_cast<off_t>(len), POSIX_FADV_DONTNEED);
    return dst + lead;
  }

  // Reads expert `key` into slot i (not holding m).
  void load(std::size_t i, std::int64_t key) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto n_exp = static_cast<std::uint64_t>(config.n_expert);
    const auto& parts = layers[static_cast<std::size_t>(static_cast<std::uint64_t>(key) / n_exp)];
    const std::uint64_t e = static_cast<std::uint64_t>(key) % n_exp;
    Slot& s = slots[i];
    for (std::size_t p = 0; p < 3; ++p)
      s.data[p] = read_part(s.base + part_start[p], parts[p].file_offset + e * parts[p].bytes, parts[p].bytes);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard lk(m);
    stats.bytes_read += expert_bytes;
    stats.read_seconds += secs;
  }

  static void release(void* u) {
    auto* h = static_cast<Handle*>(u);
    {
      std::lock_guard lk(h->impl->m);
      --h->impl->slots[h->slot].refs;
    }
    h->impl->cv.notify_all();
  }

  // The expert in slot i, pinned by its caller with 3 refs (one per buffer made here), as
  // weights; called without m (a buffer released under m would deadlock in release()).
  ExpertFfn weights(std::size_t i) {
    Slot& s = slots[i];
    const auto& parts = layers[static_cast<std::size_t>(s.key / config.n_expert)];
    auto owner = [&](std::size_t p) {
      return borrow_buffer(const_cast<std::byte*>(s.data[p]), parts[p].bytes, &Impl::release, &s.handle);
    };
    const std::int64_t ff = config.n_ff_exp, embd = config.n_embd;
    const bool fp = options.fast_prefill;
    return {expert_stack<"eff", "embd">(parts[0].info, owner(0), s.data[0], 1, ff, embd, fp).expert(0),
            expert_stack<"eff", "embd">(parts[1].info, owner(1), s.data[1], 1, ff, embd, fp).expert(0),
            expert_stack<"embd", "eff">(parts[2].info, owner(2), s.data[2], 1, embd, ff, fp).expert(0)};
  }

  void prefetch_loop() {
    std::unique_lock lk(m);
    while (true) {
      cv.wait(lk, [&] { return stop || !queue.empty(); });
      if (stop) return;
      const auto [key, guess] = queue.front();
      queue.pop_front();
      if (index.count(key)) continue;
      const std::int64_t v = victim(hint_clock);
      if (v < 0) continue;  // everything is in use or wanted by this hint: a guess is not worth more
      const auto i = static_cast<std::size_t>(v);
      claim(i, key);
      lk.unlock();
      bool ok = true;
      try {
        load(i, key);
      } catch (const Error&) {
        ok = false;  // the fetch that needs it reads it again and reports the error
      }
      lk.lock();
      Slot& s = slots[i];
      if (ok) {
        s.state = SlotState::ready;
        s.last_use = ++clock;
        s.guessed = guess;
        ++stats.prefetched;
        stats.guesses_read += guess ? 1 : 0;
      } else {
        index.erase(key);
        s.key = -1;
        s.state = SlotState::empty;
      }
      cv.notify_all();
    }
  }
};

ExpertStore::ExpertStore(const std::filesystem::path& path, const gguf::Reader& file, const ModelConfig& config,
                         std::vector<Weight<"expert", "embd">> routers, const LoadOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.file = file;
  s.config = config;
  s.routers = std::move(routers);
  s.options = options;
  s.path = path;
  FUCINA_CHECK(config.moe && config.n_expert > 0, InvalidArgument,
               "[moe-stream] '{}' is not a mixture-of-experts model: it has no routed experts to stream", path.string());
  static constexpr std::array<std::string_view, 3> names = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
  for (std::int64_t l = 0; l < config.n_layer; ++l) {
    std::array<Impl::Part, 3> parts;
    for (std::size_t p = 0; p < 3; ++p) {
      const gguf::TensorInfo& t = file.tensor(fmt::format("blk.{}.{}.weight", l, names[p]));
      const bool down = p == 2;
      parts[p].info = t;
      parts[p].bytes = check_expert_stack(t, config.n_expert, down ? config.n_embd : config.n_ff_exp,
                                          down ? config.n_ff_exp : config.n_embd);
      parts[p].file_offset = file.data_offset() + t.offset;
      // Every layer's slot has the same layout: the types may differ by layer (Q4_K_M's
      // down), so each part takes the largest.
      s.part_start[p] = std::max(s.part_start[p], round_up(parts[p].bytes, io_align) + io_align);
    }
    s.layers.push_back(parts);
  }
  std::uint64_t max_expert = 0;
  for (const auto& parts : s.layers) max_expert = std::max(max_expert, parts[0].bytes + parts[1].bytes + parts[2].bytes);
  s.expert_bytes = max_expert;
  // part_start holds each part's capacity so far: turn it into offsets.
  const std::array<std::uint64_t, 3> cap = s.part_start;
  s.part_start = {0, cap[0], cap[0] + cap[1]};
  s.slot_bytes = cap[0] + cap[1] + cap[2];
  const std::uint64_t n_slots = options.moe_cache_bytes / s.slot_bytes;
  FUCINA_CHECK(n_slots >= 1, InvalidArgument,
               "[moe-stream] a {:.1f} MiB expert cache cannot hold one expert ({:.2f} MiB with its buffers); give --moe-cache {} or more",
               static_cast<double>(options.moe_cache_bytes) / 1048576.0, static_cast<double>(s.slot_bytes) / 1048576.0,
               (s.slot_bytes + (1u << 20) - 1) >> 20);
  // No more slots than experts: a larger cache holds the whole model.
  const std::uint64_t n = std::min<std::uint64_t>(n_slots, static_cast<std::uint64_t>(config.n_layer * config.n_expert));
  s.pool_bytes = static_cast<std::size_t>(n * s.slot_bytes);
  void* p = ::mmap(nullptr, s.pool_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  FUCINA_CHECK(p != MAP_FAILED, Io, "[moe-stream] cannot allocate a {:.1f} MiB expert cache: {}",
               static_cast<double>(s.pool_bytes) / 1048576.0, std::strerror(errno));
  s.pool = p;
  s.slots.resize(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    s.slots[i].base = static_cast<std::byte*>(p) + i * s.slot_bytes;
    s.slots[i].handle = {&s, i};
  }
  s.freq_weight = static_cast<double>(s.slots.size()) / 4;
  s.hot_slots = s.slots.size() / 4;
  s.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FUCINA_CHECK(s.fd >= 0, Io, "[moe-stream] cannot open '{}': {}", path.string(), std::strerror(errno));
  if (options.moe_direct_io) s.direct_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);  // -1: buffered reads
  s.stats.slots = static_cast<std::int64_t>(s.slots.size());
  s.stats.expert_bytes = s.expert_bytes;
  if (options.moe_prefetch) s.reader = std::thread([&s] { s.prefetch_loop(); });
}

ExpertStore::~ExpertStore() = default;

ExpertFfn ExpertStore::fetch(std::int64_t layer, std::int64_t expert) {
  Impl& s = *impl_;
  FUCINA_CHECK(layer >= 0 && layer < s.config.n_layer && expert >= 0 && expert < s.config.n_expert, IndexOutOfBounds,
               "[moe-stream] expert {} of layer {} does not exist", expert, layer);
  const std::int64_t key = layer * s.config.n_expert + expert;
  std::unique_lock lk(s.m);
  const std::uint64_t now = ++s.clock;
  while (true) {
    if (const auto it = s.index.find(key); it != s.index.end()) {
      Impl::Slot& slot = s.slots[it->second];
      if (slot.state == SlotState::loading) {  // the prefetcher is on it
        s.cv.wait(lk);
        continue;
      }
      ++slot.uses;
      slot.last_use = now;
      slot.refs += 3;
      ++s.stats.hits;
      s.stats.guesses_used += slot.guessed ? 1 : 0;
      slot.guessed = false;
      const std::size_t i = it->second;
      lk.unlock();
      return s.weights(i);
    }
    const std::int64_t v = s.victim(now + 1);
    if (v < 0) {
      const bool busy = std::any_of(s.slots.begin(), s.slots.end(), [](const Impl::Slot& x) { return x.state == SlotState::loading; });
      FUCINA_CHECK(busy, InvalidArgument, "[moe-stream] all {} expert cache slots are in use: give a larger --moe-cache",
                   s.slots.size());
      s.cv.wait(lk);
      continue;
    }
    const auto i = static_cast<std::size_t>(v);
    s.claim(i, key);
    lk.unlock();
    try {
      s.load(i, key);
    } catch (...) {
      lk.lock();
      s.index.erase(key);
      s.slots[i].key = -1;
      s.slots[i].state = SlotState::empty;
      s.cv.notify_all();
      throw;
    }
    lk.lock();
    Impl::Slot& slot = s.slots[i];
    slot.state = SlotState::ready;
    slot.uses = 1;
    slot.last_use = now;
    slot.refs += 3;
    ++s.stats.misses;
    s.cv.notify_all();
    lk.unlock();
    return s.weights(i);
  }
}

void ExpertStore::prefetch(Context& ctx, std::int64_t layer, std::span<const std::int32_t> experts,
                           const Tensor<"seq", "embd">& h) {
  Impl& s = *impl_;
  if (!s.options.moe_prefetch) return;
  std::vector<Impl::Wanted> wanted;
  for (std::int32_t e : experts) wanted.push_back({layer * s.config.n_expert + e, false});
  // Guesses cost reads: they stop once 64 have been read and fewer than 1 in 4 were used.
  const ExpertStoreStats st = stats();
  const bool guess = st.guesses_read < 64 || 4 * st.guesses_used >= st.guesses_read;
  if (guess && layer + 1 < s.config.n_layer) {
    // The next layer's router on this hidden state: each row's top k by logit (the softmax
    // keeps the order), at most half the cache of guesses.
    const auto logits = linear<"embd">(ctx, h, s.routers[static_cast<std::size_t>(layer + 1)]).to_vector();
    const std::int64_t ne = s.config.n_expert, k = s.config.n_expert_used, rows = h.size<"seq">();
    const std::size_t cap = wanted.size() + std::max<std::size_t>(1, s.slots.size() / 2);
    std::vector<std::int32_t> order(static_cast<std::size_t>(ne));
    for (std::int64_t r = 0; r < rows && wanted.size() < cap; ++r) {
      const float* p = logits.data() + r * ne;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int32_t a, std::int32_t b) { return p[a] > p[b]; });
      for (std::int64_t j = 0; j < k && wanted.size() < cap; ++j) {
        const std::int64_t key = (layer + 1) * ne + order[static_cast<std::size_t>(j)];
        if (std::none_of(wanted.begin(), wanted.end(), [&](const Impl::Wanted& w) { return w.key == key; }))
          wanted.push_back({key, true});
      }
    }
  }
  {
    std::lock_guard lk(s.m);
    s.hint_clock = ++s.clock;
    s.queue.assign(wanted.begin(), wanted.end());
  }
  s.cv.notify_all();
}

ExpertStoreStats ExpertStore::stats() const {
  std::lock_guard lk(impl_->m);
  return impl_->stats;
}

}  // namespace fucina::model
