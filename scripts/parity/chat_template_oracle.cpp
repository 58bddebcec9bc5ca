// Chat-template oracle: renders a GGUF's chat template with llama.cpp for the three
// conversations used by tests/tokenizer/chat_template_test.cpp and writes the exact bytes.
//
// Usage: chat_template_oracle GGUF OUTDIR NAME
// Writes OUTDIR/NAME.<case>.txt for case in {sys_user_asst, sys_user_gen, user_asst_user_gen}:
//   <case>.txt         common_chat_templates_apply (the `llama-cli --jinja` path): vocab loaded,
//                      llama.cpp's message workarounds applied, leading BOS stripped when the
//                      vocab adds one.
//   <case>.raw.txt     same jinja path, template source given explicitly (no vocab: nothing
//                      stripped), bos/eos text from the vocab.
//   <case>.legacy.txt  llama_chat_apply_template (built-in formats, no jinja), when it knows
//                      the template; only for the report, not used by tests.
// And for each named variant (e.g. tool_use, rag) NAME.<variant>.<case>.raw.txt.
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "chat.h"
#include "common.h"
#include "llama.h"

namespace {

struct Case {
  const char* name;
  std::vector<common_chat_msg> msgs;
  bool add_generation_prompt;
};

common_chat_msg msg(const char* role, const char* content) {
  common_chat_msg m;
  m.role = role;
  m.content = content;
  return m;
}

const char* const k_system = "Sei un assistente conciso.\nRispondi in italiano \xe2\x80\x94 per favore. \xf0\x9f\x99\x82";
const char* const k_user = "  Ciao! Quanto fa 2+2?\nE perch\xc3\xa9? \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x82\x82  ";
const char* const k_asst = "Fa 4.\n\nPerch\xc3\xa9 2+2=4 \xe2\x9c\x93";
const char* const k_user2 = "Grazie \xc2\xabmille\xc2\xbb!\n";

std::vector<Case> cases() {
  return {
      {"sys_user_asst", {msg("system", k_system), msg("user", k_user), msg("assistant", k_asst)}, false},
      {"sys_user_gen", {msg("system", k_system), msg("user", k_user)}, true},
      {"user_asst_user_gen", {msg("user", k_user), msg("assistant", k_asst), msg("user", k_user2)}, true},
  };
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
  std::printf("wrote %s (%zu bytes)\n", path.c_str(), text.size());
}

std::string render(const common_chat_templates* t, const Case& c) {
  common_chat_templates_inputs in;
  in.messages = c.msgs;
  in.add_generation_prompt = c.add_generation_prompt;
  in.use_jinja = true;
  return common_chat_templates_apply(t, in).prompt;
}

std::string legacy(const std::string& src, const Case& c, bool* ok) {
  std::vector<llama_chat_message> chat;
  for (const auto& m : c.msgs) chat.push_back({m.role.c_str(), m.content.c_str()});
  std::vector<char> buf(1 << 16);
  const int n = llama_chat_apply_template(src.c_str(), chat.data(), chat.size(), c.add_generation_prompt,
                                          buf.data(), static_cast<int>(buf.size()));
  *ok = n >= 0 && n <= static_cast<int>(buf.size());
  return *ok ? std::string(buf.data(), static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s GGUF OUTDIR NAME\n", argv[0]);
    return 2;
  }
  const std::string out = std::string(argv[2]) + "/" + argv[3];
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const std::string bos = llama_vocab_bos(vocab) == LLAMA_TOKEN_NULL ? "" : common_token_to_piece(vocab, llama_vocab_bos(vocab), true);
  const std::string eos = llama_vocab_eos(vocab) == LLAMA_TOKEN_NULL ? "" : common_token_to_piece(vocab, llama_vocab_eos(vocab), true);
  write(out + ".bos_eos.txt", bos + "\n" + eos + "\n" + (llama_vocab_get_add_bos(vocab) ? "add_bos" : "no_add_bos") +
                                  "\n" + (llama_vocab_get_add_eos(vocab) ? "add_eos" : "no_add_eos") + "\n");

  auto tmpls = common_chat_templates_init(model, "");
  const std::string src = common_chat_templates_source(tmpls.get());
  for (const auto& c : cases()) {
    write(out + "." + c.name + ".txt", render(tmpls.get(), c));
    auto raw = common_chat_templates_init(nullptr, src, bos, eos);
    write(out + "." + c.name + ".raw.txt", render(raw.get(), c));
    bool ok = false;
    const std::string l = legacy(src, c, &ok);
    if (ok) write(out + "." + c.name + ".legacy.txt", l);
    else std::printf("legacy llama_chat_apply_template does not know this template\n");
  }
  for (const char* variant : {"tool_use", "rag"}) {
    const char* vsrc = llama_model_chat_template(model, variant);
    if (!vsrc) continue;
    for (const auto& c : cases()) {
      try {
        auto raw = common_chat_templates_init(nullptr, vsrc, bos, eos);
        write(out + "." + variant + "." + c.name + ".raw.txt", render(raw.get(), c));
      } catch (const std::exception& e) {
        std::printf("variant %s case %s: llama.cpp error: %s\n", variant, c.name, e.what());
      }
    }
  }
  llama_model_free(model);
  return 0;
}
