"""Renders the `extension` cases of features.json with Python Jinja2 (as Hugging Face transformers does:
trim_blocks and lstrip_blocks on) and prints {name: {"ok", "output" | "error"}} as JSON.

usage: python3 jinja2_oracle.py features.json
"""
import json
import sys

import jinja2


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    out = {}
    for case in cases:
        if not case.get("extension"):
            continue
        try:
            text = env.from_string(case["template"]).render(**case.get("context", {}))
            out[case["name"]] = {"ok": True, "output": text}
        except Exception as e:  # report, the C++ test fails on it
            out[case["name"]] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
