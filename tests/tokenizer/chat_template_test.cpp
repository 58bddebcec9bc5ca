// Chat templates: llama.cpp goldens (tests/data/chat, scripts/parity/make_chat_goldens.sh) for
// the templates in ../shared, plus self-contained tests of the Jinja interpreter.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/tokenizer/chat_template.hpp"
#include "fucina/tokenizer/jinja.hpp"
#include "support/shared_dir.hpp"

namespace fucina::tokenizer {
namespace {

namespace fs = std::filesystem;
using jinja::Array;
using jinja::Object;
using jinja::Value;

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing " << p;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The conversations of scripts/parity/chat_template_oracle.cpp (same bytes).
const std::string k_system = "Sei un assistente conciso.\nRispondi in italiano \u2014 per favore. \U0001F642";
const std::string k_user = "  Ciao! Quanto fa 2+2?\nE perch\u00e9? \u65e5\u672c\u8a9e\u3082  ";
const std::string k_asst = "Fa 4.\n\nPerch\u00e9 2+2=4 \u2713";
const std::string k_user2 = "Grazie \u00abmille\u00bb!\n";

struct Case {
  const char* name;
  std::vector<ChatMessage> msgs;
  bool add_generation_prompt;
};

std::vector<Case> cases() {
  return {
      {"sys_user_asst", {{"system", k_system}, {"user", k_user}, {"assistant", k_asst}}, false},
      {"sys_user_gen", {{"system", k_system}, {"user", k_user}}, true},
      {"user_asst_user_gen", {{"user", k_user}, {"assistant", k_asst}, {"user", k_user2}}, true},
  };
}

struct VocabTokens {
  std::string bos, eos;
  bool add_bos = false, add_eos = false;
};

// <name>.bos_eos.txt: the vocab's BOS and EOS text and add_bos/add_eos, as llama.cpp saw them.
VocabTokens vocab_tokens(const std::string& name) {
  std::istringstream in(read_file(test::test_data_dir() / "chat" / (name + ".bos_eos.txt")));
  VocabTokens v;
  std::string add_bos, add_eos;
  std::getline(in, v.bos);
  std::getline(in, v.eos);
  std::getline(in, add_bos);
  std::getline(in, add_eos);
  v.add_bos = add_bos == "add_bos";
  v.add_eos = add_eos == "add_eos";
  return v;
}

std::string golden(const std::string& stem) { return read_file(test::test_data_dir() / "chat" / (stem + ".txt")); }

void expect_goldens(const std::string& tmpl, const std::string& name, const std::string& variant) {
  const VocabTokens v = vocab_tokens(name);
  for (const Case& c : cases()) {
    SCOPED_TRACE(name + " " + variant + " " + c.name);
    const std::string stem = name + (variant.empty() ? "" : "." + variant) + "." + c.name;
    EXPECT_EQ(apply_chat_template(tmpl, c.msgs, c.add_generation_prompt, v.bos, v.eos), golden(stem + ".raw"));
    if (!variant.empty()) continue;
    ChatTemplateOptions o;
    o.add_generation_prompt = c.add_generation_prompt;
    o.bos_token = v.bos;
    o.eos_token = v.eos;
    o.strip_bos = v.add_bos;
    o.strip_eos = v.add_eos;
    EXPECT_EQ(apply_chat_template(tmpl, c.msgs, o), golden(stem));
  }
}

TEST(ChatTemplateGolden, VocabTemplatesMatchLlamaCpp) {
  FUCINA_REQUIRE_SHARED(shared);
  for (const char* name : {"command-r", "phi-3", "qwen2"}) {
    const auto file = gguf::Reader::open(shared / "vocab" / (std::string("ggml-vocab-") + name + ".gguf"));
    const auto tmpl = chat_template_of(file);
    ASSERT_TRUE(tmpl.has_value()) << name;
    expect_goldens(*tmpl, name, "");
  }
}

TEST(ChatTemplateGolden, CommandRVariantsMatchLlamaCpp) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto file = gguf::Reader::open(shared / "vocab" / "ggml-vocab-command-r.gguf");
  for (const char* variant : {"tool_use", "rag"}) {
    const auto tmpl = chat_template_of(file, variant);
    ASSERT_TRUE(tmpl.has_value()) << variant;
    expect_goldens(*tmpl, "command-r", variant);
  }
  EXPECT_FALSE(chat_template_of(file, "nope").has_value());
}

TEST(ChatTemplateGolden, TinyQwen3CarriesTheQwen2Template) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto model = chat_template_of(gguf::Reader::open(shared / "models" / "tiny-qwen3-f16.gguf"));
  const auto vocab = chat_template_of(gguf::Reader::open(shared / "vocab" / "ggml-vocab-qwen2.gguf"));
  ASSERT_TRUE(model && vocab);
  EXPECT_EQ(*model, *vocab);
}

TEST(ChatTemplateGolden, NoTemplateFallsBackToChatmlLikeLlamaCpp) {
  FUCINA_REQUIRE_SHARED(shared);
  EXPECT_FALSE(chat_template_of(gguf::Reader::open(shared / "models" / "tiny-llama-spm-f32.gguf")).has_value());
  const VocabTokens v = vocab_tokens("no-template");
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    ChatTemplateOptions o;
    o.add_generation_prompt = c.add_generation_prompt;
    o.bos_token = v.bos;
    o.eos_token = v.eos;
    o.strip_bos = v.add_bos;
    EXPECT_EQ(apply_chat_template(default_chat_template(), c.msgs, o), golden(std::string("no-template.") + c.name));
  }
}

// Every prefix of a real template either renders or throws fucina::Error.
void expect_truncations_are_safe(const std::string& tmpl) {
  const std::vector<ChatMessage> msgs{{"system", "s"}, {"user", "u"}, {"assistant", "a"}};
  int errors = 0;
  for (std::size_t n = 0; n <= tmpl.size(); ++n) {
    try {
      (void)apply_chat_template(std::string_view(tmpl).substr(0, n), msgs, true, "<s>", "</s>");
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(ChatTemplateFuzz, TruncatedSharedTemplatesGiveErrors) {
  FUCINA_REQUIRE_SHARED(shared);
  const auto cr = gguf::Reader::open(shared / "vocab" / "ggml-vocab-command-r.gguf");
  for (const char* variant : {"", "tool_use", "rag"}) expect_truncations_are_safe(*chat_template_of(cr, variant));
  for (const char* name : {"phi-3", "qwen2"})
    expect_truncations_are_safe(*chat_template_of(gguf::Reader::open(shared / "vocab" / (std::string("ggml-vocab-") + name + ".gguf"))));
}

// ---- self-contained interpreter tests -------------------------------------------------------

std::string render(std::string_view src, Object globals = {}) { return jinja::Template::parse(src).render(globals); }

// Runs `src` and returns the fucina::Error it throws (fails the test when none).
Error error_of(std::string_view src, Object globals = {}) {
  try {
    (void)render(src, std::move(globals));
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << src;
  return Error(ErrorCode::Internal, "");
}

TEST(Jinja, ExpressionsAndLiterals) {
  EXPECT_EQ(render("{{ 'a' + \"b\" ~ 1 ~ true ~ 1.0 }}"), "ab1True1.0");
  // As llama.cpp prints them: none -> "", a list -> its items, a dict -> ""; `~` drops none.
  EXPECT_EQ(render("{{ none }}|{{ 'a' ~ none }}|{{ none | string }}|{{ [1, 'x'] }}|{{ {'a': 1} }}|{{ [1, 'x'] ~ '' }}"),
            "|a|None|1x||[1, 'x']");
  EXPECT_EQ(render("{{ 3 * 'ab' }}{{ 'c' * 2 }}"), "abababcc");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }}"), "3 -4 2 3.5 1024 7");
  EXPECT_EQ(render("{{ [1, 'x', [none]] | string }} {{ {'k': 1} | string }}"), "[1, 'x', [None]] {'k': 1}");
  EXPECT_EQ(render("{{ 'y' if 1 > 2 else 'n' }}{{ 'z' if false }}"), "n");
  EXPECT_EQ(render("{{ 'ell' in 'hello' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 0} }}"), "True True True");
  EXPECT_EQ(render("{{ not 0 and 'x' or 'y' }} {{ 1 == 1.0 }} {{ 'a' != 1 }} {{ false == 0 }}"), "x True True True");
  EXPECT_EQ(render("{{ 'a\\tb\\n' }}|{{ 'it\\'s' }}"), "a\tb\n|it's");
  EXPECT_EQ(render("{{ 'abcdef'[1:4] }} {{ [1, 2, 3][::-1] | string }} {{ [1, 2, 3][-1] }} {{ 'abc'[5] }}"), "bcd [3, 2, 1] 3 ");
}

TEST(Jinja, MembersSubscriptsAndMethods) {
  Object g{{"m", Value(Object{{"role", Value("user")}, {"content", Value("  Hi there  ")}})}};
  EXPECT_EQ(render("{{ m.role }}/{{ m['role'] }}/{{ m.missing is defined }}/{{ m.content.strip() }}|", g),
            "user/user/False/Hi there|");
  EXPECT_EQ(render("{{ m.content.lstrip() }}|{{ m.content.rstrip() }}|{{ 'xxaxx'.strip('x') }}", g), "Hi there  |  Hi there|a");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'bc')) }}{{ 'a,b'.split(',') | string }}"),
            "TrueTrue['a', 'b']");
  EXPECT_EQ(render("{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}{{ 'a-b'.replace('-', '+') }}{{ m.get('x', 3) }}", g),
            "HELLOhelloa+b3");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
}

TEST(Jinja, LoopsAndLoopVariable) {
  EXPECT_EQ(render("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ x }}{{ loop.length }}"
                   "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{% if not loop.last %},{% endif %}{% endfor %}"),
            "10a3F,21b3,32c3L");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}{% endfor %}"), "13579");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "013");
  EXPECT_EQ(render("{% for x in undefined_thing %}x{% endfor %}ok"), "ok");
  EXPECT_EQ(render("{% for x in [1, 2] %}{{ loop.revindex }}{{ loop.previtem }}{% endfor %}"), "211");
}

TEST(Jinja, SetScopingAndNamespace) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(render("{% set s %}a{{ 1 + 1 }}{% endset %}[{{ s }}]"), "[a2]");
  EXPECT_EQ(render("{% set l = [] %}{% set _ = l.append(3) %}{{ l | string }}"), "[3]");
}

TEST(Jinja, Filters) {
  EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ 'aB' | upper }}|{{ 'aB' | lower }}|{{ 'h\u00e9' | length }}|{{ [1, 2] | length }}"),
            "x|AB|ab|2|2");
  EXPECT_EQ(render("{{ nope | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}"), "d||d");
  EXPECT_EQ(render("{{ {'a': [1, 'x\"y'], 'b': none, 'c': true} | tojson }}"), "{\"a\": [1, \"x\\\"y\"], \"b\": null, \"c\": true}");
  EXPECT_EQ(render("{{ [1, {'k': 2}] | tojson(indent=2) }}"), "[\n  1,\n  {\n    \"k\": 2\n  }\n]");
  EXPECT_EQ(render("{{ ['a', 'b'] | join(', ') }}|{{ [3, 4] | first }}{{ [3, 4] | last }}|{{ '5' | int + 1 }}|{{ 3 | string ~ 'x' }}"),
            "a, b|34|6|3x");
  EXPECT_EQ(render("{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|{{ 'aXa' | replace('a', 'b') }}"), "Hello World|Hello|bXb");
}

TEST(Jinja, Tests) {
  Object g{{"s", Value("x")}, {"n", Value(jinja::None{})}, {"i", Value(3)}};
  EXPECT_EQ(render("{{ s is defined }}{{ q is defined }}{{ q is undefined }}{{ n is none }}{{ s is string }}"
                   "{{ i is string }}{{ i is number }}{{ s is not none }}{{ i is odd }}{{ i is divisibleby(3) }}", g),
            "TrueFalseTrueTrueTrueFalseTrueTrueTrueTrue");
}

TEST(Jinja, WhitespaceControl) {
  // `-` strips all whitespace on its side.
  EXPECT_EQ(render("a  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(render("a\n  {%- if true -%}\n  b\n  {%- endif -%}\n  c"), "abc");
  // trim_blocks: one newline after a block tag goes; lstrip_blocks: indentation before it goes.
  EXPECT_EQ(render("{% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");
  EXPECT_EQ(render("{% for i in [1, 2] %}\n    {{ i }}\n{% endfor %}\n"), "    1\n    2\n");
  // Neither applies to {{ }}; a single trailing newline of the template is dropped.
  EXPECT_EQ(render("{{ 1 }}\n  {{ 2 }}\n\n"), "1\n  2\n");
  EXPECT_EQ(render("a {# comment #}\nb"), "a b");
  EXPECT_EQ(render("line\r\n{% if true %}\r\nx{% endif %}"), "line\nx");
}

TEST(Jinja, MalformedTemplatesReportLineAndColumn) {
  auto expect_invalid = [](std::string_view src, std::string_view where) {
    const Error e = error_of(src);
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << src;
    EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
  };
  expect_invalid("ab\ncd {{ 'x' + }}", "line 2:13: unexpected '}}'");
  expect_invalid("{% if x %}\nno end", "missing '{% endif %}'");
  expect_invalid("x\n\n  {{ 'unterminated }}", "line 3:6");
  expect_invalid("{{ 1 ", "line 1:1: unclosed '{{'");
  expect_invalid("{% for x %}{% endfor %}", "line 1:10: expected 'in'");
  expect_invalid("{% endif %}", "line 1:4: unexpected tag 'endif'");
  expect_invalid("{{ a $ b }}", "unexpected character '$'");
  expect_invalid("{# open", "unclosed comment");
  // Pathological nesting is an error, not a stack overflow.
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  expect_invalid(chain + " }}", "nested too deeply");
  expect_invalid("{{ " + std::string(1000, '(') + "1 }}", "nested too deeply");
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  expect_invalid(ifs, "nested too deeply");
  // Runtime type errors point at the operator.
  expect_invalid("\n{{ 'a' + 1 }}", "line 2:8");
  expect_invalid("{{ 1 // 0 }}", "division");
  expect_invalid("{{ 9223372036854775807 + 1 }}", "overflow");
}

TEST(Jinja, RaiseExceptionCarriesTheMessage) {
  const Error e = error_of("{% if true %}{{ raise_exception('Roles must alternate') }}{% endif %}");
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("Roles must alternate"), std::string::npos) << e.what();
}

TEST(Jinja, UnsupportedConstructsNameThemselves) {
  auto expect_unsupported = [](std::string_view src, std::string_view what) {
    const Error e = error_of(src);
    EXPECT_EQ(e.code(), ErrorCode::Unsupported) << src;
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  };
  expect_unsupported("\n{% macro f() %}{% endmacro %}", "line 2:4: unsupported tag '{% macro %}'");
  expect_unsupported("{{ x | wordwrap }}", "unsupported filter 'wordwrap'");
  expect_unsupported("{{ x is callable }}", "unsupported test 'callable'");
  expect_unsupported("{{ cycler() }}", "unsupported function 'cycler'");
  expect_unsupported("{{ 'a'.zfill(3) }}", "unsupported method 'zfill'");
}

// ---- chat layer, self-contained ----------------------------------------------------------------

const char* const k_llama3 =
    "{{- bos_token }}{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

TEST(ChatTemplate, Llama3StyleTemplate) {
  const std::vector<ChatMessage> msgs{{"system", "S"}, {"user", " U \n"}};
  EXPECT_EQ(apply_chat_template(k_llama3, msgs, true, "<|begin_of_text|>", "<|eot_id|>"),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  ChatTemplateOptions o;
  o.bos_token = "<|begin_of_text|>";
  o.strip_bos = true;
  o.add_generation_prompt = false;
  EXPECT_EQ(apply_chat_template(k_llama3, msgs, o).rfind("<|start_header_id|>system", 0), 0u);
}

TEST(ChatTemplate, SystemMessageMergedWhenTemplateIgnoresIt) {
  // Reads only user/assistant content, like Phi-3's: the system text moves into the first user turn.
  const char* tmpl = "{% for m in messages %}{% if m.role == 'user' %}[{{ m.content }}]{% endif %}{% endfor %}";
  const std::vector<ChatMessage> msgs{{"system", "sys"}, {"user", "hi"}};
  EXPECT_EQ(apply_chat_template(tmpl, msgs, false, "", ""), "[sys\nhi]");
  EXPECT_EQ(apply_chat_template(tmpl, std::vector<ChatMessage>{{"system", "alone"}}, false, "", ""), "");
  // A template that reads it keeps it; "developer" is read as "system".
  const std::vector<ChatMessage> dev{{"developer", "d"}, {"user", "u"}};
  EXPECT_EQ(apply_chat_template("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}", dev, false, "", ""),
            "system:d;user:u;");
}

TEST(ChatTemplate, DefaultIsChatml) {
  const std::vector<ChatMessage> msgs{{"user", "a\nb"}, {"assistant", "c"}};
  EXPECT_EQ(apply_chat_template(default_chat_template(), msgs, true, "", ""),
            "<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\nc<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(default_chat_template(), msgs, false, "", "").size(),
            std::string("<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\nc<|im_end|>\n").size());
}

TEST(ChatTemplate, FuzzedTemplatesNeverCrash) {
  const std::string seeds[] = {std::string(default_chat_template()), k_llama3,
                               "{% set ns = namespace(a=[]) %}{% for m in messages[1:] if m.role != 'x' %}"
                               "{{ (m.content | tojson)[1:-1] ~ loop.index }}{% else %}{{ messages | length }}{% endfor %}"};
  const std::vector<ChatMessage> msgs{{"system", "s"}, {"user", "u"}, {"assistant", "a"}};
  const std::string alphabet = "{}%#-+()[]'\".,|~:=<>!*/ abnsxmitloprefd0123\n";
  std::mt19937 rng(1234);
  int ok = 0, errors = 0;
  for (const std::string& seed : seeds) {
    for (int iter = 0; iter < 400; ++iter) {
      std::string t = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < edits && !t.empty(); ++k) {
        const std::size_t at = rng() % t.size();
        switch (rng() % 3) {
          case 0: t[at] = alphabet[rng() % alphabet.size()]; break;
          case 1: t.erase(at, 1 + rng() % 3); break;
          default: t.insert(at, 1, alphabet[rng() % alphabet.size()]);
        }
      }
      try {
        (void)apply_chat_template(t, msgs, true, "<s>", "</s>");
        ++ok;
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace fucina::tokenizer
