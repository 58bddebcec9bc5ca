#include "fucina/train/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <string_view>

#include "fucina/core/bounded_read.hpp"
#include "fucina/core/error.hpp"
#include "fucina/core/rng.hpp"
#include "fucina/generate/chat.hpp"

namespace fucina::train {

namespace {

using tokenizer::TokenId;
using Tokens = std::vector<TokenId>;

// Collects examples, applying the context limit and counting what it cuts or drops.
class Collector {
 public:
  explicit Collector(std::int64_t ctx) : max_len_(static_cast<std::size_t>(ctx) + 1) {}

  void add(Tokens tokens, std::vector<std::uint8_t> loss) {
    if (tokens.size() > max_len_) {
      tokens.resize(max_len_);
      loss.resize(max_len_);
      ++ds_.stats.truncated;
    }
    if (!loss.empty()) loss[0] = 0;  // the first token has no prediction
    const auto n_loss = std::count(loss.begin(), loss.end(), std::uint8_t{1});
    if (n_loss == 0) {
      ++ds_.stats.skipped;
      return;
    }
    ds_.stats.examples += 1;
    ds_.stats.tokens += static_cast<std::int64_t>(tokens.size());
    ds_.stats.loss_tokens += n_loss;
    ds_.examples.push_back({std::move(tokens), std::move(loss)});
  }
  Dataset take() { return std::move(ds_); }

 private:
  std::size_t max_len_;
  Dataset ds_;
};

// Where a line's error points.
struct LineRef {
  const std::filesystem::path& path;
  std::size_t line;
  [[noreturn]] void fail(std::string_view why) const {
    ::fucina::fail(ErrorCode::InvalidFile, fmt::format("[dataset] {}:{}: {}", path.string(), line, why));
  }
};

class Encoder {
 public:
  explicit Encoder(const tokenizer::Tokenizer& tok) : tok_(tok) {}

  // BOS when the model adds one, then `text` (control-token texts parsed when `special`).
  Tokens encode(std::string_view text, bool special) const {
    Tokens out;
    if (tok_.add_bos() && tok_.bos_id() >= 0) out.push_back(tok_.bos_id());
    tok_.encode(text, {.add_special = false, .parse_special = special}, out);
    return out;
  }
  void append_eos(Tokens& t) const {
    if (tok_.eos_id() >= 0) t.push_back(tok_.eos_id());
  }
  const tokenizer::Tokenizer& tok() const { return tok_; }

 private:
  const tokenizer::Tokenizer& tok_;
};

bool is_prefix(const Tokens& p, const Tokens& of) { return p.size() <= of.size() && std::equal(p.begin(), p.end(), of.begin()); }

const std::string& string_field(const nlohmann::json& obj, const char* key, const LineRef& at) {
  const auto& v = obj.at(key);
  if (!v.is_string()) at.fail(fmt::format("\"{}\" must be a string", key));
  return v.get_ref<const std::string&>();
}

void add_chat(const nlohmann::json& messages, const gguf::Reader& model, const Encoder& enc, const LineRef& at,
              Collector& out) {
  if (!messages.is_array() || messages.empty()) at.fail("\"messages\" must be a non-empty array");
  std::vector<tokenizer::ChatMessage> msgs;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m.contains("content"))
      at.fail(fmt::format("messages[{}] must be an object with \"role\" and \"content\"", i));
    const auto& role = m.at("role");
    const auto& content = m.at("content");
    if (!role.is_string() || !content.is_string()) at.fail(fmt::format("messages[{}]: role and content must be strings", i));
    msgs.push_back({role.get<std::string>(), content.get<std::string>()});
  }
  const std::span<const tokenizer::ChatMessage> all(msgs);
  const auto render = [&](std::size_t n, bool generation_prompt) {
    try {
      return enc.encode(generate::render_chat(model, enc.tok(), all.first(n), generation_prompt), true);
    } catch (const Error& e) {
      at.fail(fmt::format("the chat template failed: {}", e.what()));
    }
  };
  Tokens tokens = render(msgs.size(), false);
  std::vector<std::uint8_t> loss(tokens.size(), 0);
  bool any = false;
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    if (msgs[i].role != "assistant") continue;
    any = true;
    const Tokens before = render(i, true);
    if (!is_prefix(before, tokens))
      at.fail(fmt::format("the chat template renders the messages before messages[{}] (assistant) differently once "
                          "later messages follow; split the conversation there",
                          i));
    // The turn: up to and including its end-of-turn token; for a template without one,
    // what rendering the turn adds.
    std::size_t end = before.size();
    while (end < tokens.size() && !enc.tok().is_eog(tokens[end])) ++end;
    if (end < tokens.size()) {
      ++end;
    } else {
      const Tokens with = render(i + 1, false);
      if (!is_prefix(with, tokens))
        at.fail(fmt::format("the chat template renders messages[{}] (assistant) differently once later messages "
                            "follow; split the conversation after it",
                            i));
      end = with.size();
    }
    std::fill(loss.begin() + static_cast<std::ptrdiff_t>(before.size()), loss.begin() + static_cast<std::ptrdiff_t>(end), 1);
  }
  if (!any) at.fail("a conversation needs at least one \"assistant\" message to learn from");
  out.add(std::move(tokens), std::move(loss));
}

void add_prompt_completion(const std::string& prompt, const std::string& completion, const Encoder& enc, Collector& out) {
  const Tokens p = enc.encode(prompt, false);
  Tokens tokens = enc.encode(prompt + completion, false);
  const auto common = static_cast<std::size_t>(std::mismatch(p.begin(), p.end(), tokens.begin(), tokens.end()).first - p.begin());
  enc.append_eos(tokens);
  std::vector<std::uint8_t> loss(tokens.size(), 0);
  std::fill(loss.begin() + static_cast<std::ptrdiff_t>(common), loss.end(), 1);
  out.add(std::move(tokens), std::move(loss));
}

void add_text(const std::string& text, const Encoder& enc, Collector& out) {
  Tokens tokens = enc.encode(text, false);
  enc.append_eos(tokens);
  std::vector<std::uint8_t> loss(tokens.size(), 1);
  out.add(std::move(tokens), std::move(loss));
}

void load_jsonl(const std::filesystem::path& path, std::string_view data, const gguf::Reader& model, const Encoder& enc,
                Collector& out) {
  std::size_t line_no = 0;
  for (std::size_t b = 0; b < data.size();) {
    std::size_t e = data.find('\n', b);
    if (e == std::string_view::npos) e = data.size();
    std::string_view line = data.substr(b, e - b);
    b = e + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const LineRef at{path, line_no};
    nlohmann::json obj;
    try {
      obj = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& err) {
      std::string_view why = err.what();
      if (const auto p = why.find("] "); p != std::string_view::npos) why.remove_prefix(p + 2);  // nlohmann's "[json.exception...] "
      at.fail(fmt::format("not valid JSON: {}", why));
    }
    if (!obj.is_object()) at.fail("expected a JSON object");
    const bool chat = obj.contains("messages"), pc = obj.contains("prompt") || obj.contains("completion"),
               text = obj.contains("text");
    if (chat + pc + text != 1)
      at.fail(chat + pc + text == 0
                  ? "expected \"messages\", \"prompt\" and \"completion\", or \"text\""
                  : "mixes formats: use one of \"messages\", \"prompt\"/\"completion\" or \"text\" per line");
    if (chat) {
      add_chat(obj.at("messages"), model, enc, at, out);
    } else if (pc) {
      if (!obj.contains("prompt") || !obj.contains("completion")) at.fail("\"prompt\" and \"completion\" go together");
      add_prompt_completion(string_field(obj, "prompt", at), string_field(obj, "completion", at), enc, out);
    } else {
      add_text(string_field(obj, "text", at), enc, out);
    }
  }
}

// Windows of ctx + 1 tokens, each starting on the previous one's last token.
void load_plain(std::string_view data, const tokenizer::Tokenizer& tok, std::int64_t ctx, Collector& out) {
  const Tokens all = tok.encode(data, {.add_special = true, .parse_special = false});
  const auto step = static_cast<std::size_t>(ctx);
  for (std::size_t b = 0; b + 1 < all.size(); b += step) {
    const std::size_t e = std::min(all.size(), b + step + 1);
    Tokens window(all.begin() + static_cast<std::ptrdiff_t>(b), all.begin() + static_cast<std::ptrdiff_t>(e));
    std::vector<std::uint8_t> loss(window.size(), 1);
    out.add(std::move(window), std::move(loss));
  }
}

DatasetStats count(const std::vector<Example>& examples) {
  DatasetStats s;
  for (const Example& ex : examples) {
    s.examples += 1;
    s.tokens += static_cast<std::int64_t>(ex.tokens.size());
    s.loss_tokens += std::count(ex.loss.begin(), ex.loss.end(), std::uint8_t{1});
  }
  return s;
}

}  // namespace

Dataset load_dataset(const std::filesystem::path& path, const gguf::Reader& model_file, const tokenizer::Tokenizer& tok,
                     std::int64_t ctx) {
  FUCINA_CHECK(ctx >= 1, InvalidArgument, "[dataset] the context must be at least 1 token, got {}", ctx);
  const std::string data = read_file_bounded(path, max_dataset_bytes);
  FUCINA_CHECK(!data.empty(), InvalidArgument, "[dataset] '{}' is empty", path.string());
  Collector out(ctx);
  if (path.extension() == ".jsonl")
    load_jsonl(path, data, model_file, Encoder(tok), out);
  else
    load_plain(data, tok, ctx, out);
  Dataset ds = out.take();
  FUCINA_CHECK(!ds.examples.empty(), InvalidArgument, "[dataset] '{}' has no example with a token to learn ({} skipped)",
               path.string(), ds.stats.skipped);
  return ds;
}

std::pair<Dataset, Dataset> split_validation(Dataset all, double fraction, std::uint64_t seed) {
  FUCINA_CHECK(fraction >= 0 && fraction < 1, InvalidArgument, "[dataset] the validation fraction must be in [0, 1), got {}",
               fraction);
  const std::size_t n = all.examples.size();
  std::size_t n_val = 0;
  if (fraction > 0) n_val = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(fraction * static_cast<double>(n))));
  FUCINA_CHECK(n_val < n || n_val == 0, InvalidArgument,
               "[dataset] holding out {} of {} examples for validation leaves none to train on", n_val, n);
  // Fisher-Yates on the counter-based generator: the same split for the same seed anywhere.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng::bits(seed, i) % i]);
  std::vector<bool> held(n, false);
  for (std::size_t i = 0; i < n_val; ++i) held[order[i]] = true;

  Dataset train, val;
  for (std::size_t i = 0; i < n; ++i) (held[i] ? val : train).examples.push_back(std::move(all.examples[i]));
  train.stats = count(train.examples);
  train.stats.truncated = all.stats.truncated;
  train.stats.skipped = all.stats.skipped;
  val.stats = count(val.examples);
  return {std::move(train), std::move(val)};
}

}  // namespace fucina::train
