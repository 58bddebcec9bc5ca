#!/usr/bin/env python3
"""Cross-checks the committed weight goldens against llama-quantize itself.

Writes a one-layer llama-architecture GGUF whose blk.0.ffn_down.weight holds the
edge-case rows of tests/data/quant/inputs.f32 (512 x 11, f32) -- all but row 2, whose
1e30 magnitudes overflow every f16 scale, which llama-quantize's output validation
(ggml_validate_row_data) refuses -- runs
`llama-quantize --pure IN OUT TYPE` for every weight type, and compares the quantized
tensor bytes with the encoded part of tests/data/quant/<type>.bin.

Needs Debian's python3-numpy and llama.cpp's gguf-py (GGUF_PY, default
~/.cache/fucina-peers/llama.cpp/gguf-py), LLAMA_BIN = directory holding llama-quantize,
and a vocab-only GGUF for the tokenizer keys (VOCAB, default ../shared/vocab/ggml-vocab-llama-spm.gguf).
Usage: /usr/bin/python3 check_llama_quantize.py <repo>
"""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.environ.get("GGUF_PY", os.path.expanduser("~/.cache/fucina-peers/llama.cpp/gguf-py")))
import numpy as np  # noqa: E402
import gguf  # noqa: E402

ROWS, N = 12, 512
KEEP = [r for r in range(ROWS) if r != 2]
TYPES = ["f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k",
         "q5_k", "q6_k", "iq4_nl", "iq4_xs", "tq1_0", "tq2_0"]
# llama-quantize's spelling of the target type
FTYPE = {"f16": "F16", "bf16": "BF16", "q4_0": "Q4_0", "q4_1": "Q4_1", "q5_0": "Q5_0",
         "q5_1": "Q5_1", "q8_0": "Q8_0", "q2_k": "Q2_K", "q3_k": "Q3_K_M", "q4_k": "Q4_K_M",
         "q5_k": "Q5_K_M", "q6_k": "Q6_K", "iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS",
         "tq1_0": "TQ1_0", "tq2_0": "TQ2_0"}


def copy_tokenizer(w, vocab_path):
    src = gguf.GGUFReader(vocab_path)
    for name, f in src.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                w.add_key_value(name, [bytes(f.parts[i]) for i in f.data], vt, sub_type=sub)
            else:
                w.add_array(name, [f.parts[i].tolist()[0] for i in f.data])
        elif vt == gguf.GGUFValueType.STRING:
            w.add_key_value(name, bytes(f.parts[f.data[0]]).decode("utf-8"), vt)
        else:
            w.add_key_value(name, f.parts[f.data[0]].tolist()[0], vt)
    return len(src.fields["tokenizer.ggml.tokens"].data)


def main():
    repo = sys.argv[1]
    data = os.path.join(repo, "tests", "data", "quant")
    rows = np.fromfile(os.path.join(data, "inputs.f32"), dtype="<f4").reshape(ROWS, N)
    bindir = os.environ["LLAMA_BIN"]
    vocab = os.environ.get("VOCAB", os.path.join(repo, "..", "shared", "vocab", "ggml-vocab-llama-spm.gguf"))
    tmp = tempfile.mkdtemp(prefix="quant_goldens_")
    src = os.path.join(tmp, "in.gguf")
    w = gguf.GGUFWriter(src, "llama")
    w.add_context_length(64)
    w.add_embedding_length(N)
    w.add_block_count(1)
    w.add_feed_forward_length(len(KEEP))
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_rope_dimension_count(N // 4)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    copy_tokenizer(w, vocab)
    # ggml order: ne0 = N (row length), ne1 = ROWS -> numpy shape (ROWS, N)
    w.add_tensor("blk.0.ffn_down.weight", rows[KEEP].astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    failures = 0
    for t in TYPES:
        out = os.path.join(tmp, f"out-{t}.gguf")
        subprocess.run([os.path.join(bindir, "llama-quantize"), "--pure", src, out, FTYPE[t]],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tensor = next(x for x in gguf.GGUFReader(out).tensors if x.name == "blk.0.ffn_down.weight")
        got = bytes(np.asarray(tensor.data).tobytes())
        golden = open(os.path.join(data, f"{t}.bin"), "rb").read()
        _, _, _, row_bytes = struct.unpack("<4I", golden[4:20])
        want = b"".join(golden[20 + r * row_bytes:20 + (r + 1) * row_bytes] for r in KEEP)
        ok = got == want
        failures += 0 if ok else 1
        print(f"{t:7s} {tensor.tensor_type.name:7s} {'identical' if ok else 'DIFFERENT'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
