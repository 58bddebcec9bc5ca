// The backward engine: iterative topology discovery, then wavefront execution. A node
// runs once every consumer has delivered its gradient (an atomic counter drains); the
// ready nodes run one after the other, newest first, each with the whole worker pool for
// its kernels. (Running ready nodes as concurrent pool tasks made every kernel inside them
// serial -- a parallel_for inside a task runs on its thread alone -- so a transformer's
// backward, where a big product is ready next to a small add, used one core.)
// Contributions to one node are summed in consumer-creation order, so gradients are
// bit-identical for any number of workers.
#include <algorithm>
#include <unordered_set>

#include "fucina/autograd/node.hpp"
#include "fucina/core/error.hpp"
#include "fucina/core/raw/elementwise.hpp"

namespace fucina::autograd {

namespace {
std::atomic<std::uint64_t> g_seq{0};
thread_local int t_no_grad = 0;
thread_local std::vector<Node*>* t_destroy_queue = nullptr;
}  // namespace

Node::Node() : seq_(g_seq.fetch_add(1, std::memory_order_relaxed)) {}

bool grad_enabled() noexcept { return t_no_grad == 0; }
NoGradGuard::NoGradGuard() noexcept { ++t_no_grad; }
NoGradGuard::~NoGradGuard() { --t_no_grad; }
EnableGradGuard::EnableGradGuard() noexcept : saved_(t_no_grad) { t_no_grad = 0; }
EnableGradGuard::~EnableGradGuard() { t_no_grad = saved_; }
std::uint64_t nodes_created() noexcept { return g_seq.load(std::memory_order_relaxed); }

void destroy_node(Node* n) noexcept {
  if (t_destroy_queue) {  // already draining on this thread: defer, no recursion
    t_destroy_queue->push_back(n);
    return;
  }
  std::vector<Node*> work{n};
  t_destroy_queue = &work;
  while (!work.empty()) {
    Node* cur = work.back();
    work.pop_back();
    std::vector<NodeRef> inputs = std::move(cur->inputs_);
    delete cur;
    inputs.clear();  // may push more nodes onto `work`
  }
  t_destroy_queue = nullptr;
}

class Engine {
 public:
  static void run(Context& ctx, Node* root, const RawTensor& seed);

 private:
  static RawTensor sum_contributions(Context& ctx, Node* n);
  static void accumulate_leaf(Context& ctx, Node* n, const RawTensor& g);
};

RawTensor Engine::sum_contributions(Context& ctx, Node* n) {
  auto& cs = n->contribs_;
  FUCINA_ASSERT(!cs.empty());
  std::sort(cs.begin(), cs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (cs.size() == 1) {
    RawTensor g = std::move(cs[0].second);
    cs.clear();
    return g;
  }
  RawTensor acc = ctx.empty(DType::f32, cs[0].second.rank, cs[0].second.shape);
  raw::binary(ctx, raw::BinaryOp::add, cs[0].second, cs[1].second, acc);
  for (std::size_t i = 2; i < cs.size(); ++i) raw::binary(ctx, raw::BinaryOp::add, acc, cs[i].second, acc);
  cs.clear();
  return acc;
}

void Engine::accumulate_leaf(Context& ctx, Node* n, const RawTensor& g) {
  // Read-add-write under the leaf's lock: a checkpoint's inner backward may accumulate
  // into the same leaf concurrently.
  std::lock_guard lk(n->mu_);
  RawTensor fresh = ctx.empty(DType::f32, g.rank, g.shape);
  if (n->grad_.buf) raw::binary(ctx, raw::BinaryOp::add, n->grad_, g, fresh);
  else raw::copy(ctx, g, fresh);
  n->grad_ = std::move(fresh);
}

void Engine::run(Context& ctx, Node* root, const RawTensor& seed) {
  // 1. Discover the graph (iteratively) and validate before touching any counter, so a
  //    failure leaves everything re-runnable.
  std::vector<Node*> order{root};
  std::unordered_set<Node*> seen{root};
  for (std::size_t i = 0; i < order.size(); ++i) {
    Node* n = order[i];
    FUCINA_CHECK(!n->ran_, InvalidArgument,
                 "[backward] node '{}' already ran backward; build a new graph (forward again) for another pass", n->name());
    for (const NodeRef& in : n->inputs_)
      if (in && seen.insert(in.get()).second) order.push_back(in.get());
  }
  for (Node* n : order) {
    n->pending_.store(0, std::memory_order_relaxed);
    n->contribs_.clear();
  }
  for (Node* n : order)
    for (const NodeRef& in : n->inputs_)
      if (in) in->pending_.fetch_add(1, std::memory_order_relaxed);
  root->contribs_.emplace_back(~std::uint64_t{0}, seed);

  // 2. Wavefronts of ready nodes.
  std::vector<Node*> ready{root};
  std::mutex ready_mu;
  auto process = [&](Node* n) {
    RawTensor gy = sum_contributions(ctx, n);
    if (n->leaf_) {
      accumulate_leaf(ctx, n, gy);
      return;
    }
    std::vector<RawTensor> grads(n->inputs_.size());
    n->backward(ctx, gy, grads);
    n->ran_ = true;
    n->release_saved();
    for (std::size_t i = 0; i < n->inputs_.size(); ++i) {
      Node* p = n->inputs_[i].get();
      if (!p) continue;
      FUCINA_ASSERT(grads[i].buf);
      {
        std::lock_guard lk(p->mu_);
        p->contribs_.emplace_back(n->seq_, std::move(grads[i]));
      }
      if (p->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lk(ready_mu);
        ready.push_back(p);
      }
    }
  };
  while (!ready.empty()) {
    std::vector<Node*> batch;
    batch.swap(ready);
    std::sort(batch.begin(), batch.end(), [](Node* a, Node* b) { return a->seq_ > b->seq_; });
    for (Node* n : batch) process(n);
  }
}

void run_backward(Context& ctx, const NodeRef& root, const RawTensor& seed) {
  FUCINA_CHECK(root, InvalidArgument, "[backward] the tensor does not require grad (no variable reaches it)");
  NoGradGuard no_grad;  // backward computations never record nodes themselves
  Engine::run(ctx, root.get(), seed);
}

}  // namespace fucina::autograd
