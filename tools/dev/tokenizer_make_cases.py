#!/usr/bin/env python3
"""Regenerates tests/data/tokenizer/: hard-text tokenizer goldens from llama-tokenize.

Usage: tools/dev/tokenizer_make_cases.py [LLAMA_BIN_DIR]
  LLAMA_BIN_DIR defaults to `../shared/peers/llama-cpp.sh --print`.

Writes hard.inp (inputs separated by "\\n__ggml_vocab_test__\\n", the layout of llama.cpp's
tests/test-tokenizer-0) and, per vocabulary, two id files with one line per input:
  <vocab>.plain.out    llama-tokenize --ids --no-escape --no-bos --no-parse-special
  <vocab>.special.out  llama-tokenize --ids --no-escape  (parses special tokens; BOS/EOS as the model says)
Inputs are raw bytes (some are deliberately invalid UTF-8).
"""
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("FUCINA_SHARED", ROOT.parent / "shared"))
OUT = ROOT / "tests" / "data" / "tokenizer"
SEP = b"\n__ggml_vocab_test__\n"

CASES = [
    "Hello мир 世界 مرحبا שלום नमस्ते γειά σου",
    "🦙🔥 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 👍🏽 😶‍🌫️",
    "e\u0301 a\u0300\u0316 Z\u0351\u036b\u0343 q\u0307\u0323 ñ vs n\u0303",
    "a" + " " * 40 + "b\t\t\t\n\n\n   \r\n\r\n" + " " * 17,
    "   leading spaces",
    "\n\nnewlines first\n",
    "1234567890 3.14159 1,000,000 ١٢٣٤ ５６７ 00007",
    "def f(x):\n    return x**2  # comment\n\tif (a && b) { c->d[i] += 0x1F; }\n",
    "<s> </s> <|im_start|>user\nhi<|im_end|> <|endoftext|> <|begin_of_text|> <unk>",
    "<s>hello</s><|im_end <| |> <<|im_end|>>",
    "I'm you're he'LL they'VE it's we'd DON'T o'clock",
    "...!!! ??? --- ___ *** <<>> ((( ))) @@ ## $$ %% ^^ && || ~~ ``",
    "a\u00a0b\u3000c\u2003d\u180ee\u200bf\u0085g\u2028h",
    "日本語のテキストです。한국어 텍스트. 中文，标点！カタカナ ｶﾀｶﾅ",
    "supercalifragilisticexpialidocious" * 3,
    "x" * 300,
    "עברית 123 العربية ٤٥٦ mixed",
    "∑∫√∞≠≤≥ ± × ÷ → ⇒ ∀∃ ℝ ℵ",
    "it’s ‘quoted’ “double” — dash – en",
    " \t \n \u00a0 ",
    "ＡＢＣ ａｂｃ ǅ ǈ ß ẞ İ ı",
    "http://example.com/path?q=1&r=two#frag user@mail.org",
    "    Hello\n    Hello\n\tTab\r\nCRLF",
    "",
]
BYTE_CASES = [
    b"abc\xff\xfe def \xc3 \xe2\x82 end",
    b"\xed\xa0\x80 surrogate \xc0\x80 overlong \x80\x80 stray",
    b"tail incomplete \xf0\x9f\xa6",
]

def vocabs():
    v = sorted(SHARED.glob("vocab/ggml-vocab-*.gguf"))
    v += [SHARED / "models" / "tiny-qwen3-f16.gguf", SHARED / "models" / "tiny-llama-spm-f32.gguf"]
    return [p for p in v if p.exists()]

def tokenize(bin_dir, model, data, extra):
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
        name = f.name
    try:
        r = subprocess.run([str(pathlib.Path(bin_dir) / "llama-tokenize"), "-m", str(model), "-f", name,
                            "--ids", "--log-disable", "--no-escape"] + extra,
                           capture_output=True, check=True)
    finally:
        os.unlink(name)
    line = r.stdout.decode().strip().splitlines()[-1]
    return line.strip("[]").replace(",", "").split()

def main():
    bin_dir = sys.argv[1] if len(sys.argv) > 1 else subprocess.run(
        [str(SHARED / "peers" / "llama-cpp.sh"), "--print"], capture_output=True, text=True, check=True).stdout.strip()
    inputs = [c.encode() for c in CASES] + BYTE_CASES
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "hard.inp").write_bytes(SEP.join(inputs))
    for model in vocabs():
        stem = model.name.removeprefix("ggml-vocab-").removesuffix(".gguf")
        for mode, extra in (("plain", ["--no-bos", "--no-parse-special"]), ("special", [])):
            lines = [" ".join(tokenize(bin_dir, model, data, extra)) for data in inputs]
            (OUT / f"{stem}.{mode}.out").write_text("\n".join(lines) + "\n")
        print(f"{stem}: {len(inputs)} cases")

if __name__ == "__main__":
    main()
