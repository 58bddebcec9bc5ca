// fucina tokenize: text -> token ids, printed exactly like `llama-tokenize --ids --log-disable`
// (llama.cpp's defaults too: escapes like \n are processed, special tokens are parsed, and
// BOS/EOS are added when the model's metadata asks for them).
#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "command.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "input.hpp"

namespace {

using fucina::cli::UsageError;
namespace tk = fucina::tokenizer;

constexpr std::string_view usage =
    "usage: fucina tokenize MODEL.gguf [TEXT] [options]\n"
    "  TEXT                 text to tokenize (or -p TEXT, -f FILE, --stdin)\n"
    "  -p, --prompt TEXT    text to tokenize\n"
    "  -f, --file FILE      read the text from FILE (bytes verbatim)\n"
    "  --stdin              read the text from standard input\n"
    "  --no-bos             do not add BOS/EOS even if the model asks for them\n"
    "  --parse-special      parse special-token text like <|im_end|> (default)\n"
    "  --no-parse-special   treat special-token text as plain text\n"
    "  --no-escape          do not process escapes (\\n, \\t, \\xNN, ...) in the text\n"
    "  --show-pieces        print one 'ID -> 'piece'' line per token instead of the id list\n"
    "  --show-count         also print the number of tokens\n";

// llama.cpp's string_process_escapes.
std::string process_escapes(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 >= in.size()) {
      out.push_back(in[i]);
      continue;
    }
    const char e = in[++i];
    switch (e) {
      case 'n': out.push_back('\n'); continue;
      case 'r': out.push_back('\r'); continue;
      case 't': out.push_back('\t'); continue;
      case '\'': out.push_back('\''); continue;
      case '"': out.push_back('"'); continue;
      case '\\': out.push_back('\\'); continue;
      case 'x':
        if (i + 2 < in.size()) {
          const char hex[3] = {in[i + 1], in[i + 2], 0};
          char* end = nullptr;
          const long v = std::strtol(hex, &end, 16);
          if (end == hex + 2) {
            i += 2;
            out.push_back(static_cast<char>(v));
            continue;
          }
        }
        break;
      default: break;
    }
    out.push_back('\\');
    out.push_back(e);
  }
  return out;
}

int tokenize_main(std::span<char* const> args) {
  std::string model, text, file;
  bool have_text = false, use_stdin = false, no_bos = false, parse_special = true, escape = true;
  bool show_pieces = false, show_count = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value", a)};
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      fmt::print("{}", usage);
      return 0;
    } else if (a == "-m" || a == "--model") {
      model = value();
    } else if (a == "-p" || a == "--prompt") {
      text = value();
      have_text = true;
    } else if (a == "-f" || a == "--file") {
      file = value();
    } else if (a == "--stdin") {
      use_stdin = true;
    } else if (a == "--no-bos") {
      no_bos = true;
    } else if (a == "--parse-special") {
      parse_special = true;
    } else if (a == "--no-parse-special") {
      parse_special = false;
    } else if (a == "--no-escape") {
      escape = false;
    } else if (a == "--escape") {
      escape = true;
    } else if (a == "--show-pieces") {
      show_pieces = true;
    } else if (a == "--show-count") {
      show_count = true;
    } else if (a == "--ids" || a == "--log-disable") {
      // llama-tokenize compatibility: the id list is our default output, we never log.
    } else if (!a.empty() && a[0] == '-' && a.size() > 1) {
      throw UsageError{fmt::format("unknown option '{}'\n{}", a, usage)};
    } else if (model.empty()) {
      model = std::string(a);
    } else if (!have_text) {
      text = std::string(a);
      have_text = true;
    } else {
      throw UsageError{fmt::format("unexpected argument '{}'\n{}", a, usage)};
    }
  }
  if (model.empty()) throw UsageError{fmt::format("missing MODEL.gguf\n{}", usage)};
  if (!use_stdin && file.empty() && !have_text)
    throw UsageError{fmt::format("must give TEXT, -p, -f or --stdin\n{}", usage)};

  // Same precedence as llama-tokenize: --stdin, then -f, then the prompt.
  if (use_stdin) text = fucina::cli::read_stdin();
  else if (!file.empty()) text = fucina::cli::read_input_file(file);
  if (escape) text = process_escapes(text);

  const tk::Tokenizer tok(tk::load_tokenizer_data(fucina::gguf::Reader::open(model)));
  const bool add_special = tok.add_bos() && !no_bos;
  const std::vector<tk::TokenId> ids = tok.encode(text, {.add_special = add_special, .parse_special = parse_special});

  std::string out;
  if (show_pieces) {
    for (const tk::TokenId id : ids) {
      // As llama-tokenize on POSIX: the piece's raw bytes via printf("%s"), so up to a NUL.
      std::string_view p = tok.piece(id, true);
      p = p.substr(0, p.find('\0'));
      out += fmt::format("{:6d} -> '", id);
      out.append(p);
      out += "'\n";
    }
  } else {
    out += '[';
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(ids[i]);
    }
    out += "]\n";
  }
  if (show_count) out += fmt::format("Total number of tokens: {}\n", ids.size());
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

const fucina::cli::Command reg{"tokenize", "print the token ids of a text (llama-tokenize compatible)", tokenize_main};

}  // namespace
