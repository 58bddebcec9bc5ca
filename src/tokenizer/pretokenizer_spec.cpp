// Pre-tokenizer regex lists by tokenizer.ggml.pre name. The patterns are the ones the
// Hugging Face tokenizer.json files declare, in the adapted form llama.cpp matches
// (case-insensitive groups spelled out, possessive quantifiers made greedy).
#include "fucina/tokenizer/pretokenizer_spec.hpp"

namespace fucina::tokenizer {

namespace {

const std::string contractions_ci = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
const std::string gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const std::string llama3 = contractions_ci +
                           "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                           "\\s+(?!\\S)|\\s+";
const std::string qwen2 = contractions_ci +
                          "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                          "\\s+(?!\\S)|\\s+";
const std::string poro = " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";
const std::string cjk_kana = "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+";
const std::string cjk_hangul = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{167F}\\x{1681}-\\x{1FFF}\\x{200B}-\\x{2027}\\x{202A}-\\x{202E}\\x{2030}-\\x{205E}\\x{2060}-\\x{2FFF}\\x{3001}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
const std::string deepseek3_main =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

std::vector<PreTokenizerSpec> build_specs() {
  std::vector<PreTokenizerSpec> s;
  auto add = [&](std::vector<std::string> names, std::vector<std::string> pats, bool clean_spaces,
                 bool ignore_merges = false, bool add_bos = false) -> PreTokenizerSpec& {
    PreTokenizerSpec spec;
    spec.names = std::move(names);
    spec.patterns = std::move(pats);
    spec.clean_spaces = clean_spaces;
    spec.ignore_merges = ignore_merges;
    spec.add_bos = add_bos;
    s.push_back(std::move(spec));
    return s.back();
  };
  add({"default", ""}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", gpt2, "\\p{N}+", "[0-9][0-9][0-9]"}, true);
  add({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
      {llama3}, true, true, true);
  add({"dbrx", "smaug-bpe"}, {llama3}, true);
  add({"glm4", "chatglm-bpe"}, {llama3}, true).no_bos_token = true;
  // llama.cpp runs these literal-class patterns on text whose non-ASCII whitespace was
  // replaced by U+000B, so whitespace never matches a class: it is cut out of the ranges.
  add({"deepseek-llm"},
      {"[\\r\\n]",
       "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
       "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3001}-\\x{3002}]+", "\\s+$",
       cjk_hangul, "\\p{N}+"},
      false);
  add({"deepseek-coder"}, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", cjk_hangul, "\\p{N}"}, false);
  add({"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, {"\\p{N}{1,3}", cjk_kana, deepseek3_main}, false);
  add({"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", gpt2, "[0-9][0-9][0-9]"}, true);
  add({"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"}, {"\\p{N}", gpt2}, true);
  add({"command-r", "smollm"}, {"\\p{N}", gpt2}, false);
  add({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
       "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "exaone4"},
      {gpt2}, true);
  add({"trillion", "granite-docling"}, {gpt2}, false);
  add({"jais-2"},
      {contractions_ci +
       "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|"
       "\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|"
       "\\s{1,2}(?!\\S)|\\s{1}"},
      true);
  add({"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2"}, {qwen2}, false);
  add({"stablelm2", "megrez"}, {qwen2}, true);
  add({"qwen35"},
      {contractions_ci +
       "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
       "\\s+"},
      false);
  add({"poro-chat"}, {poro}, false);
  add({"bloom", "gpt3-finnish"}, {poro}, true);
  add({"viking"}, {poro, "\\p{N}"}, false);
  add({"tekken"},
      {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-"
       "z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
      false, true, true);
  add({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
      {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" + contractions_ci +
       "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" + contractions_ci +
       "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
      false);
  add({"bailingmoe", "bailingmoe2", "llada-moe"},
      {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
       "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
      false);
  add({"seed-coder"},
      {contractions_ci +
       "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
      false);
  add({"ufakzeka"},
      {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, false);
  add({"laguna"}, {"[^\\n]+|[\\n]+", qwen2}, false);
  return s;
}

}  // namespace

const std::vector<PreTokenizerSpec>& pretokenizer_specs() {
  static const std::vector<PreTokenizerSpec> specs = build_specs();
  return specs;
}

const PreTokenizerSpec* find_pretokenizer_spec(std::string_view name) {
  for (const PreTokenizerSpec& s : pretokenizer_specs())
    for (const std::string& n : s.names)
      if (n == name) return &s;
  return nullptr;
}

}  // namespace fucina::tokenizer
