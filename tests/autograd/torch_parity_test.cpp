// Loss and every gradient of a small MLP and a one-block transformer (RMSNorm, RoPE, GQA
// attention, SwiGLU) against PyTorch float32 goldens (tools/dev/autograd_goldens).
// Tolerance: max |ours - torch| <= 1e-5 * max |torch| per tensor.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "fucina/fucina.hpp"
#include "support/shared_dir.hpp"

using namespace fucina;

namespace {

struct Golden {
  nlohmann::json doc;
  explicit Golden(const std::string& name) {
    std::ifstream f(test::test_data_dir() / "autograd" / (name + ".json"));
    doc = nlohmann::json::parse(f);
  }
  std::vector<float> data(const std::string& section, const std::string& key) const {
    return doc.at(section).at(key).at("data").get<std::vector<float>>();
  }
  template <class T>
  T tensor(Context& ctx, const std::string& key) const {
    const auto shape = doc.at("tensors").at(key).at("shape").get<std::vector<std::int64_t>>();
    typename T::Sizes s{};
    for (std::size_t i = 0; i < T::rank; ++i) s[i] = shape.at(i);
    auto v = data("tensors", key);
    return T::from_data(ctx, s, std::span<const float>(v)).variable();
  }
  template <class T>
  void expect_grad(const std::string& key, const T& t) const {
    const auto want = data("grads", key);
    ASSERT_TRUE(t.grad().defined()) << key;
    const auto got = t.grad().to_vector();
    ASSERT_EQ(got.size(), want.size()) << key;
    double max_ref = 0, max_err = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      max_ref = std::max(max_ref, double(std::fabs(want[i])));
      max_err = std::max(max_err, double(std::fabs(got[i] - want[i])));
    }
    EXPECT_LE(max_err, 1e-5 * max_ref) << "gradient of " << key << ": max err " << max_err << " (max |g| " << max_ref << ")";
  }
  void expect_loss(float loss) const {
    const double want = doc.at("loss").get<double>();
    EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want));
  }
  template <class T>
  T targets(Context& ctx) const {
    auto t = doc.at("target").get<std::vector<std::int32_t>>();
    return T::from_data(ctx, {static_cast<std::int64_t>(t.size())}, std::span<const std::int32_t>(t));
  }
};

}  // namespace

TEST(TorchParity, Mlp) {
  Context ctx({.threads = 2});
  Golden g("mlp");
  auto x = g.tensor<Tensor<"b", "in">>(ctx, "x");
  auto w1 = g.tensor<Tensor<"h1", "in">>(ctx, "w1");
  auto b1 = g.tensor<Tensor<"h1">>(ctx, "b1");
  auto w2 = g.tensor<Tensor<"h2", "h1">>(ctx, "w2");
  auto b2 = g.tensor<Tensor<"h2">>(ctx, "b2");
  auto w3 = g.tensor<Tensor<"cls", "h2">>(ctx, "w3");
  auto target = g.targets<TensorT<DType::i32, "b">>(ctx);
  auto h = tanh(ctx, add(ctx, x.dot<"in">(ctx, w1), b1));
  auto h2 = silu(ctx, add(ctx, h.dot<"h1">(ctx, w2), b2));
  auto loss = cross_entropy<"cls">(ctx, h2.dot<"h2">(ctx, w3), target);
  loss.backward(ctx);
  g.expect_loss(loss.item());
  g.expect_grad("x", x);
  g.expect_grad("w1", w1);
  g.expect_grad("b1", b1);
  g.expect_grad("w2", w2);
  g.expect_grad("b2", b2);
  g.expect_grad("w3", w3);
}

TEST(TorchParity, TransformerBlock) {
  Context ctx({.threads = 2});
  Golden g("block");
  constexpr std::int64_t hd = 4, grp = 2;
  auto x = g.tensor<Tensor<"seq", "embd">>(ctx, "x");
  auto g1 = g.tensor<Tensor<"embd">>(ctx, "g1");
  auto wq = g.tensor<Tensor<"qd", "embd">>(ctx, "wq");
  auto wk = g.tensor<Tensor<"kd", "embd">>(ctx, "wk");
  auto wv = g.tensor<Tensor<"kd", "embd">>(ctx, "wv");
  auto wo = g.tensor<Tensor<"embd", "qd">>(ctx, "wo");
  auto g2 = g.tensor<Tensor<"embd">>(ctx, "g2");
  auto wg = g.tensor<Tensor<"ff", "embd">>(ctx, "wg");
  auto wu = g.tensor<Tensor<"ff", "embd">>(ctx, "wu");
  auto wd = g.tensor<Tensor<"embd", "ff">>(ctx, "wd");
  auto wout = g.tensor<Tensor<"vocab", "embd">>(ctx, "wout");
  auto target = g.targets<TensorT<DType::i32, "seq">>(ctx);
  const std::int64_t seq = x.size<"seq">();
  std::vector<std::int32_t> pos(static_cast<std::size_t>(seq));
  for (std::int64_t i = 0; i < seq; ++i) pos[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);

  auto h = mul(ctx, rms_norm<"embd">(ctx, x, 1e-5f), g1);
  auto q = rope<"seq", "hd">(ctx, split<"qd", "head", "hd">(h.dot<"embd">(ctx, wq), hd), pos, 1e4f, RopeMode::normal);
  auto k = rope<"seq", "hd">(ctx, split<"kd", "kvh", "hd">(h.dot<"embd">(ctx, wk), hd), pos, 1e4f, RopeMode::normal);
  auto v = split<"kd", "kvh", "hd">(h.dot<"embd">(ctx, wv), hd);
  auto qg = split<"head", "kvh", "grp">(q, grp);  // head = kvh * grp + g (GQA)
  auto scores = einsum<"kvh", "grp", "seq", "kseq">(ctx, qg, rename<"seq", "kseq">(k));
  auto masked = add(ctx, mul(ctx, scores, 1.f / std::sqrt(float(hd))), causal_mask<"seq", "kseq">(ctx, seq, seq));
  auto probs = softmax<"kseq">(ctx, masked);
  auto o = einsum<"seq", "kvh", "grp", "hd">(ctx, probs, rename<"seq", "kseq">(v));
  auto attn = merge<"head", "hd", "qd">(merge<"kvh", "grp", "head">(o)).dot<"qd">(ctx, wo);
  auto x2 = add(ctx, x, attn);
  auto h2 = mul(ctx, rms_norm<"embd">(ctx, x2, 1e-5f), g2);
  auto ff = mul(ctx, silu(ctx, h2.dot<"embd">(ctx, wg)), h2.dot<"embd">(ctx, wu));
  auto y = add(ctx, x2, ff.dot<"ff">(ctx, wd));
  auto loss = cross_entropy<"vocab">(ctx, y.dot<"embd">(ctx, wout), target);
  loss.backward(ctx);
  g.expect_loss(loss.item());
  g.expect_grad("x", x);
  g.expect_grad("g1", g1);
  g.expect_grad("wq", wq);
  g.expect_grad("wk", wk);
  g.expect_grad("wv", wv);
  g.expect_grad("wo", wo);
  g.expect_grad("g2", g2);
  g.expect_grad("wg", wg);
  g.expect_grad("wu", wu);
  g.expect_grad("wd", wd);
  g.expect_grad("wout", wout);
}
