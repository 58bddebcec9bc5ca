// Training data loading (train/dataset.hpp): the token sequences and loss masks each format
// gives, checked by decoding what the mask selects.
#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fucina/core/error.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/model/synth.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "fucina/tokenizer/tokenizer_data.hpp"
#include "fucina/train/dataset.hpp"
#include "support/shared_dir.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
namespace ft = fucina::train;
using fucina::tokenizer::Tokenizer;
using fucina::tokenizer::TokenId;

namespace {

class Dataset : public fucina::test::TempDirTest {
 protected:
  Dataset() : TempDirTest("dataset") {}

  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

  // A synthetic model with the built-in byte-level SPM vocabulary (BOS <s>, EOS </s>) and
  // its tokenizer, made on first use.
  const fucina::gguf::Reader& model() {
    if (!model_) {
      fucina::model::write_synthetic_model(dir_ / "m.gguf", fucina::model::SynthSpec{});
      model_ = fucina::gguf::Reader::open(dir_ / "m.gguf");
      tok_.emplace(fucina::tokenizer::load_tokenizer_data(*model_));
    }
    return *model_;
  }
  const Tokenizer& tok() { return model(), *tok_; }
  // `text` written to dir_/name and loaded with the synthetic model.
  ft::Dataset load(const std::string& name, const std::string& text, std::int64_t ctx) {
    return ft::load_dataset(write(name, text), model(), tok(), ctx);
  }

 private:
  std::optional<fucina::gguf::Reader> model_;
  std::optional<Tokenizer> tok_;
};

using fucina::test::error_of;

// Each run of loss = 1 tokens, decoded with control tokens printed.
std::vector<std::string> masked_spans(const Tokenizer& tok, const ft::Example& ex) {
  std::vector<std::string> out;
  std::vector<TokenId> span;
  for (std::size_t i = 0; i <= ex.tokens.size(); ++i) {
    if (i < ex.tokens.size() && ex.loss[i]) {
      span.push_back(ex.tokens[i]);
    } else if (!span.empty()) {
      out.push_back(tok.decode(span, {.render_special = true, .continues_text = true}));
      span.clear();
    }
  }
  return out;
}

TEST_F(Dataset, PlainTextIsCutIntoWindowsOverlappingByOneToken) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += fmt::format("line {} of the corpus.\n", i);
  const auto ds = load("corpus.txt", text, 16);
  const auto all = tok().encode(text);  // BOS as the model says
  ASSERT_GT(all.size(), 100u);
  std::vector<TokenId> joined{all[0]};
  std::int64_t targets = 0;
  for (std::size_t k = 0; k < ds.examples.size(); ++k) {
    const auto& ex = ds.examples[k];
    ASSERT_LE(ex.tokens.size(), 17u);
    ASSERT_GE(ex.tokens.size(), 2u);
    if (k + 1 < ds.examples.size()) {
      EXPECT_EQ(ex.tokens.size(), 17u);
    }
    EXPECT_EQ(ex.tokens[0], joined.back()) << "window " << k << " does not start on the previous one's last token";
    EXPECT_EQ(ex.loss[0], 0);
    for (std::size_t i = 1; i < ex.tokens.size(); ++i) {
      EXPECT_EQ(ex.loss[i], 1);
      joined.push_back(ex.tokens[i]);
      ++targets;
    }
  }
  EXPECT_EQ(joined, all);  // every token but the first is a target exactly once
  EXPECT_EQ(ds.stats.loss_tokens, targets);
  EXPECT_EQ(ds.stats.examples, static_cast<std::int64_t>(ds.examples.size()));
  EXPECT_EQ(ds.stats.truncated, 0);
}

TEST_F(Dataset, PromptCompletionAndTextMasks) {
  const auto ds = load("d.jsonl",
                       "{\"prompt\": \"Question: 2+2=\", \"completion\": \" 4, of course\"}\n"
                       "\n"
                       "{\"text\": \"All of it.\", \"id\": 7}\r\n",
                       512);
  const Tokenizer& tok = this->tok();
  ASSERT_EQ(ds.examples.size(), 2u);
  const auto& pc = ds.examples[0];
  EXPECT_EQ(pc.tokens.front(), tok.bos_id());
  EXPECT_EQ(pc.tokens.back(), tok.eos_id());
  EXPECT_EQ(masked_spans(tok, pc), std::vector<std::string>{" 4, of course</s>"});
  const auto& tx = ds.examples[1];
  EXPECT_EQ(tx.loss[0], 0);
  EXPECT_EQ(tx.tokens.back(), tok.eos_id());
  EXPECT_EQ(masked_spans(tok, tx), std::vector<std::string>{" All of it.</s>"});  // SPM space prefix
  EXPECT_EQ(ds.stats.examples, 2);
  EXPECT_EQ(ds.stats.tokens, static_cast<std::int64_t>(pc.tokens.size() + tx.tokens.size()));
}

TEST_F(Dataset, LongExamplesAreTruncatedOrSkippedAndCounted) {
  const auto ds = load("d.jsonl",
                       "{\"text\": \"abcdefghijklmnopqrstuvwxyz\"}\n"
                       "{\"prompt\": \"abcdefghijklmnopqrstuvwxyz\", \"completion\": \"!\"}\n"
                       "{\"text\": \"ab\"}\n",
                       8);
  EXPECT_EQ(ds.stats.truncated, 2);
  EXPECT_EQ(ds.stats.skipped, 1);  // the prompt fills the context: nothing left to learn
  ASSERT_EQ(ds.examples.size(), 2u);
  EXPECT_EQ(ds.examples[0].tokens.size(), 9u);
  const auto full = tok().encode("abcdefghijklmnopqrstuvwxyz");
  EXPECT_EQ(ds.examples[0].tokens, std::vector<TokenId>(full.begin(), full.begin() + 9));
}

TEST_F(Dataset, BadLinesNameFileLineAndWhy) {
  const auto fails = [&](const std::string& line2) {
    return error_of([&] { load("bad.jsonl", "{\"text\": \"fine\"}\n" + line2 + "\n", 64); });
  };
  const std::string at = fmt::format("[dataset] {}:2: ", (dir_ / "bad.jsonl").string());
  EXPECT_EQ(fails("{\"text\": \"x\""), at + "not valid JSON: parse error at line 1, column 13: syntax error while parsing object - "
                                            "unexpected end of input; expected '}'");
  EXPECT_EQ(fails("[1, 2]"), at + "expected a JSON object");
  EXPECT_EQ(fails("{\"input\": \"x\"}"), at + "expected \"messages\", \"prompt\" and \"completion\", or \"text\"");
  EXPECT_EQ(fails("{\"text\": \"x\", \"prompt\": \"y\"}"),
            at + "mixes formats: use one of \"messages\", \"prompt\"/\"completion\" or \"text\" per line");
  EXPECT_EQ(fails("{\"prompt\": \"y\"}"), at + "\"prompt\" and \"completion\" go together");
  EXPECT_EQ(fails("{\"text\": 5}"), at + "\"text\" must be a string");
  EXPECT_EQ(fails("{\"messages\": []}"), at + "\"messages\" must be a non-empty array");
  EXPECT_EQ(fails("{\"messages\": [{\"role\": \"user\"}]}"), at + "messages[0] must be an object with \"role\" and \"content\"");
  EXPECT_EQ(fails("{\"messages\": [{\"role\": \"user\", \"content\": 1}]}"), at + "messages[0]: role and content must be strings");
  EXPECT_EQ(fails("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"),
            at + "a conversation needs at least one \"assistant\" message to learn from");

  EXPECT_EQ(error_of([&] { ft::load_dataset(dir_ / "absent.jsonl", model(), tok(), 64); }).rfind("cannot open", 0), 0u);
  EXPECT_EQ(error_of([&] { ft::load_dataset(dir_, model(), tok(), 64); }),
            fmt::format("'{}' is a directory, not a text file", dir_.string()));
  EXPECT_EQ(error_of([&] { load("e.txt", "", 64); }),
            fmt::format("[dataset] '{}' is empty", (dir_ / "e.txt").string()));
}

// Chat masking on a real template: the masked tokens are each assistant turn's text and its
// end token, nothing of the prompt, the roles or the text after the end token.
void expect_assistant_masks(const fucina::gguf::Reader& model, const std::string& end_token, const fs::path& file) {
  const Tokenizer tok(fucina::tokenizer::load_tokenizer_data(model));
  const auto ds = ft::load_dataset(file, model, tok, 4096);
  ASSERT_EQ(ds.examples.size(), 2u);
  EXPECT_EQ(masked_spans(tok, ds.examples[0]), (std::vector<std::string>{"Paris." + end_token}));
  EXPECT_EQ(masked_spans(tok, ds.examples[1]),
            (std::vector<std::string>{"It is 4." + end_token, "Yes, 5 is one more than 4." + end_token}));
  EXPECT_EQ(ds.stats.loss_tokens,
            static_cast<std::int64_t>(tok.encode("Paris.", {.add_special = false}).size() +
                                      tok.encode("It is 4.", {.add_special = false}).size() +
                                      tok.encode("Yes, 5 is one more than 4.", {.add_special = false}).size() + 3));
}

const char* const k_conversations =
    R"({"messages": [{"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris."}]})"
    "\n"
    R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},)"
    R"( {"role": "assistant", "content": "It is 4."}, {"role": "user", "content": "And 5 is next?"},)"
    R"( {"role": "assistant", "content": "Yes, 5 is one more than 4."}]})"
    "\n";

TEST_F(Dataset, ChatMasksAssistantTurnsChatML) {
  FUCINA_REQUIRE_SHARED(shared);
  // Qwen's vocabulary and ChatML template: <|im_start|>role\ncontent<|im_end|>\n.
  const auto model = fucina::gguf::Reader::open(shared / "vocab" / "ggml-vocab-qwen2.gguf");
  expect_assistant_masks(model, "<|im_end|>", write("chat.jsonl", k_conversations));
}

TEST_F(Dataset, ChatMasksAssistantTurnsLlama3) {
  FUCINA_REQUIRE_SHARED(shared);
  // Llama 3's vocabulary with its template: <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>.
  const auto vocab = fucina::gguf::Reader::open(shared / "vocab" / "ggml-vocab-llama-bpe.gguf");
  auto w = fucina::gguf::Writer::from_reader(vocab);
  w.set_string("tokenizer.chat_template",
               "{{- bos_token }}{%- for message in messages %}"
               "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
               "'<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}"
               "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}");
  const auto model = fucina::gguf::Reader::parse(w.to_bytes());
  expect_assistant_masks(model, "<|eot_id|>", write("chat.jsonl", k_conversations));
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The vocabulary's GGUF with `tmpl` as its chat template.
fucina::gguf::Reader with_template(const fucina::gguf::Reader& vocab, const std::string& tmpl) {
  auto w = fucina::gguf::Writer::from_reader(vocab);
  w.set_string("tokenizer.chat_template", tmpl);
  return fucina::gguf::Reader::parse(w.to_bytes());
}

// The models' own templates (tests/data/train/*.jinja, from llama.cpp's models/templates):
// Llama 3.1's system preamble (knowledge/today dates) is never trained; Qwen3's puts an
// empty think block before the last assistant turn (after the last user message), which
// the model generates too, so it is trained with that turn.
TEST_F(Dataset, ChatMasksWithTheRealLlama31AndQwen3Templates) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto dir = fucina::test::test_data_dir() / "train";
  const auto file = write("chat.jsonl", k_conversations);
  {
    const auto model = with_template(fucina::gguf::Reader::open(shared / "vocab" / "ggml-vocab-llama-bpe.gguf"),
                                     read_text(dir / "meta-llama-Llama-3.1-8B-Instruct.jinja"));
    expect_assistant_masks(model, "<|eot_id|>", file);
  }
  const auto model = with_template(fucina::gguf::Reader::open(shared / "vocab" / "ggml-vocab-qwen2.gguf"),
                                   read_text(dir / "Qwen-Qwen3-0.6B.jinja"));
  const Tokenizer tok(fucina::tokenizer::load_tokenizer_data(model));
  const auto ds = ft::load_dataset(file, model, tok, 4096);
  ASSERT_EQ(ds.examples.size(), 2u);
  EXPECT_EQ(masked_spans(tok, ds.examples[0]), (std::vector<std::string>{"<think>\n\n</think>\n\nParis.<|im_end|>"}));
  EXPECT_EQ(masked_spans(tok, ds.examples[1]),
            (std::vector<std::string>{"It is 4.<|im_end|>", "<think>\n\n</think>\n\nYes, 5 is one more than 4.<|im_end|>"}));
}

// A template whose text before a turn changes once later messages follow cannot be masked
// from one render; a template that fails is named with the line.
TEST_F(Dataset, ChatTemplatesThatCannotBeMaskedAreErrors) {
  const auto counting = with_template(model(), "{{ messages|length }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
  const Tokenizer tok(fucina::tokenizer::load_tokenizer_data(counting));
  const auto file = write("c.jsonl", R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})");
  EXPECT_EQ(error_of([&] { ft::load_dataset(file, counting, tok, 64); }),
            fmt::format("[dataset] {}:1: the chat template renders the messages before messages[1] (assistant) "
                        "differently once later messages follow; split the conversation there",
                        file.string()));
  const auto raising = with_template(model(), "{{ raise_exception('no training here') }}");
  EXPECT_EQ(error_of([&] { ft::load_dataset(file, raising, tok, 64); }),
            fmt::format("[dataset] {}:1: the chat template failed: [jinja] line 1:19: raise_exception: no training here", file.string()));
}

TEST_F(Dataset, ValidationSplitIsDeterministicAndDisjoint) {
  ft::Dataset all;
  for (int i = 0; i < 40; ++i) all.examples.push_back({{1, i + 2, i + 3}, {0, 1, 1}});
  all.stats = {40, 120, 80, 3, 2};
  const auto [train, val] = ft::split_validation(all, 0.1, 7);
  ASSERT_EQ(val.examples.size(), 4u);
  ASSERT_EQ(train.examples.size(), 36u);
  EXPECT_EQ(val.stats.examples, 4);
  EXPECT_EQ(val.stats.loss_tokens, 8);
  EXPECT_EQ(train.stats.tokens, 108);
  EXPECT_EQ(train.stats.truncated, 3);
  EXPECT_EQ(train.stats.skipped, 2);
  std::set<int> seen;
  int last = -1;
  for (const auto& ex : train.examples) {
    EXPECT_GT(ex.tokens[1], last);  // file order kept
    last = ex.tokens[1];
    seen.insert(ex.tokens[1]);
  }
  for (const auto& ex : val.examples) seen.insert(ex.tokens[1]);
  EXPECT_EQ(seen.size(), 40u);
  const auto again = ft::split_validation(all, 0.1, 7).second;
  const auto other = ft::split_validation(all, 0.1, 8).second;
  std::vector<int> a, b, c;
  for (const auto& ex : val.examples) a.push_back(ex.tokens[1]);
  for (const auto& ex : again.examples) b.push_back(ex.tokens[1]);
  for (const auto& ex : other.examples) c.push_back(ex.tokens[1]);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);

  EXPECT_EQ(ft::split_validation(all, 0.001, 1).second.examples.size(), 1u);  // at least one
  EXPECT_EQ(ft::split_validation(all, 0.0, 1).second.examples.size(), 0u);
  ft::Dataset one;
  one.examples.push_back({{1, 2}, {0, 1}});
  EXPECT_THROW(ft::split_validation(one, 0.5, 1), fucina::Error);
  EXPECT_THROW(ft::split_validation(all, 1.0, 1), fucina::Error);
}

}  // namespace
