#pragma once
// A backward node: the operation that produced a tensor, linked to the nodes of its
// operands. There is no tape and no graph object: the links inside the live tensors are
// the graph, and backward() discovers it by walking them.
//
// Note [Refcounted node links]: a tensor handle holds a NodeRef to the node that made it;
// a node holds NodeRefs to its operands' nodes and RawTensor views (buffer refcounts) of
// the values its backward needs. Handles can be dropped in any order: whatever backward
// still needs stays alive until backward has run, and a node frees what it saved right
// after it runs. Releasing the last handle of a long chain is iterative (no recursion).
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "fucina/core/context.hpp"
#include "fucina/core/raw_tensor.hpp"

namespace fucina::autograd {

class Node;

void destroy_node(Node* n) noexcept;  // refcount reached zero; iterative

class NodeRef {
 public:
  NodeRef() = default;
  explicit NodeRef(Node* n) noexcept;  // takes a new reference
  NodeRef(const NodeRef& o) noexcept;
  NodeRef(NodeRef&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
  NodeRef& operator=(const NodeRef& o) noexcept {
    NodeRef t(o);
    std::swap(n_, t.n_);
    return *this;
  }
  NodeRef& operator=(NodeRef&& o) noexcept {
    NodeRef t(std::move(o));
    std::swap(n_, t.n_);
    return *this;
  }
  ~NodeRef() { reset(); }
  void reset() noexcept;
  Node* get() const noexcept { return n_; }
  Node* operator->() const noexcept { return n_; }
  explicit operator bool() const noexcept { return n_ != nullptr; }
  Node* release() noexcept { return std::exchange(n_, nullptr); }

 private:
  Node* n_ = nullptr;
};

class Node {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual const char* name() const = 0;
  // Gradients for every non-null input, given the gradient of this node's output (same
  // shape as the output). grads[i] may be a strided view; it is never written later.
  virtual void backward(Context& ctx, const RawTensor& gy, std::span<RawTensor> grads) = 0;
  // Frees what the forward saved (called once backward ran).
  virtual void release_saved() {}

  bool is_leaf() const noexcept { return leaf_; }
  std::uint64_t seq() const noexcept { return seq_; }
  std::span<const NodeRef> inputs() const noexcept { return inputs_; }

  // Leaf gradient (accumulated over backward calls; a new buffer on each accumulation, so
  // a previously returned grad tensor never changes under the caller).
  RawTensor grad() const {
    std::lock_guard lk(mu_);
    return grad_;
  }
  void set_grad(RawTensor g) {
    std::lock_guard lk(mu_);
    grad_ = std::move(g);
  }

 protected:
  std::vector<NodeRef> inputs_;
  bool leaf_ = false;

 private:
  friend class NodeRef;
  friend void destroy_node(Node*) noexcept;
  friend class Engine;
  std::atomic<std::uint32_t> refs_{0};
  std::uint64_t seq_;
  mutable std::mutex mu_;
  RawTensor grad_;
  // Engine state of the backward pass in flight.
  std::atomic<int> pending_{0};
  std::vector<std::pair<std::uint64_t, RawTensor>> contribs_;
  bool ran_ = false;
};

inline NodeRef::NodeRef(Node* n) noexcept : n_(n) {
  if (n_) n_->refs_.fetch_add(1, std::memory_order_relaxed);
}
inline NodeRef::NodeRef(const NodeRef& o) noexcept : n_(o.n_) {
  if (n_) n_->refs_.fetch_add(1, std::memory_order_relaxed);
}
inline void NodeRef::reset() noexcept {
  if (n_ && n_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy_node(n_);
  n_ = nullptr;
}

// A variable's own node: holds its accumulated gradient, has no inputs.
class LeafNode final : public Node {
 public:
  LeafNode() { leaf_ = true; }
  const char* name() const override { return "leaf"; }
  void backward(Context&, const RawTensor&, std::span<RawTensor>) override {}
};

// Gradient recording is on unless a NoGradGuard is alive on this thread.
bool grad_enabled() noexcept;

class NoGradGuard {
 public:
  NoGradGuard() noexcept;
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
};

// Re-enables recording inside a NoGradGuard (checkpoint recomputation in backward).
class EnableGradGuard {
 public:
  EnableGradGuard() noexcept;
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  int saved_;
};

// Nodes created so far in this process (tests assert ES creates none).
std::uint64_t nodes_created() noexcept;

// Builds a node of type N with the given operand links (null entries = constants).
template <class N, class... Args>
NodeRef make_node(std::vector<NodeRef> inputs, Args&&... args) {
  auto* n = new N(std::forward<Args>(args)...);
  n->set_inputs(std::move(inputs));
  return NodeRef(n);
}

// Base for op nodes: stores the operand links.
class OpNode : public Node {
 public:
  void set_inputs(std::vector<NodeRef> in) { inputs_ = std::move(in); }
};

// Runs backward from `root` seeded with `seed` (the output's gradient).
void run_backward(Context& ctx, const NodeRef& root, const RawTensor& seed);

}  // namespace fucina::autograd
