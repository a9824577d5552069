#!/usr/bin/env python3
"""Writes the vanilla fixture as a checkpoint in Hugging Face layout:

    write_hf_checkpoint.py FIXTURE_DIR OUT_DIR

OUT_DIR/config.json is the fixture's `hf_config` (the complete
GPTNeoXConfig.to_dict() of the official run, model_type "gpt_neox"), exactly as
`save_pretrained` would write it, and OUT_DIR/model.safetensors a copy of the
fixture's weights (HF GPTNeoXForCausalLM names: gpt_neox.*, embed_out.weight).
Python standard library only.
"""
import json
import os
import shutil
import sys


def main():
    fixture, out = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(fixture, "config.json")))
    hf = cfg["hf_config"]
    assert hf["model_type"] == "gpt_neox", hf["model_type"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(hf, f, indent=2, sort_keys=True)
        f.write("\n")
    shutil.copyfile(os.path.join(fixture, "model.safetensors"),
                    os.path.join(out, "model.safetensors"))


if __name__ == "__main__":
    main()
