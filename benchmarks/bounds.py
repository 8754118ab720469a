"""How the numerics and amp bounds fare on real models (issue 46 item 1a): the share of healthy runs that pass, per
torch, and the share of broken-torch runs that fail, with exact (Clopper-Pearson) intervals.

Each run is a real `run --device cpu` of one interpreter (a venv with torch and the models' packages) on a team's
workloads (timm, torchvision, transformers; untrained, small inputs, a loss on the outputs), each aspect in
[numerics, amp], dtype float32. A model whose package does not import there is left out and said (torchvision 0.28.0
does not load beside torch 2.13.0's CPU wheel, and timm needs torchvision). `--seeds N` runs each model from N
different weights and inputs (the factory seeds itself from TUC_BOUNDS_SEED). `--breaks` runs the same workloads'
numerics under the tests' harness (tests/harness) with each breakage (linear-1e-3: a 0.1% kernel change in every
dtype but float64; linear-grad-5pct), where every run must fail.

    .venv/bin/python benchmarks/bounds.py --python VENV_2_14_1/bin/python --python VENV_2_13_0/bin/python \\
        --out benchmarks/results/bounds      # about 40 minutes on 2 quiet cores with the default models
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))
from harness import interpreter  # noqa: E402

from torch_upgrade_check.analysis.stats import exact_binomial_interval  # noqa: E402

MODELS = '''\
"""Real models, untrained, with a loss on their outputs; seeded from TUC_BOUNDS_SEED."""
import os

import torch


def _with_loss(model, inputs):
    def loss(out):
        out = getattr(out, "last_hidden_state", out)
        return out.float().square().mean()
    return {"model": model.eval(), "inputs": inputs, "loss": loss}


def _seed():
    torch.manual_seed(int(os.environ.get("TUC_BOUNDS_SEED", "0")))


def vit_tiny():
    import timm
    _seed()
    return _with_loss(timm.create_model("vit_tiny_patch16_224", num_classes=10), (torch.randn(2, 3, 224, 224),))


def resnet18():
    import timm
    _seed()
    return _with_loss(timm.create_model("resnet18", num_classes=10), (torch.randn(2, 3, 64, 64),))


def mobilenet_v3_small():
    import torchvision
    _seed()
    return _with_loss(torchvision.models.mobilenet_v3_small(num_classes=10), (torch.randn(2, 3, 64, 64),))


def bert():
    from transformers import BertConfig, BertModel
    _seed()
    cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128,
                     max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return _with_loss(BertModel(cfg), (torch.randint(0, 1000, (2, 32)),))


def gpt2():
    from transformers import GPT2Config, GPT2Model
    _seed()
    cfg = GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=4, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return _with_loss(GPT2Model(cfg), (torch.randint(0, 1000, (2, 32)),))


def hf_vit12():
    from transformers import ViTConfig, ViTModel
    _seed()
    cfg = ViTConfig(hidden_size=192, num_hidden_layers=12, num_attention_heads=3, intermediate_size=768, image_size=64,
                    patch_size=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return _with_loss(ViTModel(cfg, add_pooling_layer=False), (torch.randn(2, 3, 64, 64),))


def hf_mobilenet_v2():
    from transformers import MobileNetV2Config, MobileNetV2Model
    _seed()
    return _with_loss(MobileNetV2Model(MobileNetV2Config(depth_multiplier=0.35)), (torch.randn(2, 3, 64, 64),))
'''
NEEDS = {"vit_tiny": "timm", "resnet18": "timm", "mobilenet_v3_small": "torchvision", "bert": "transformers",
         "gpt2": "transformers", "hf_vit12": "transformers", "hf_mobilenet_v2": "transformers"}


def importable(python: str, package: str) -> bool:
    return subprocess.run([python, "-c", f"import {package}"], capture_output=True, check=False, timeout=300).returncode == 0


def run(python: str, folder: Path, models: list[str], aspects: str, seed: int) -> dict[str, dict]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench_models.py").write_text(MODELS)
    (folder / "torch-upgrade-check.yml").write_text("version: 1\nsuite: none\npython-path: [.]\nworkloads:\n" + "".join(
        f"  - name: {m}\n    factory: bench_models:{m}\n    aspects: [{aspects}]\n    dtypes: [float32]\n" for m in models))
    subprocess.run([sys.executable, "-m", "torch_upgrade_check", "run", "--python", python, "--device", "cpu", "--out",
                    str(folder / "out"), "--no-job-summary", "--timeout", "1800"], cwd=folder, capture_output=True,
                   check=False, timeout=7200, env={**os.environ, "TUC_BOUNDS_SEED": str(seed)})
    report = json.loads((folder / "out" / "report.json").read_text())
    torch = report["environment"].get("torch_version")
    return {r["id"]: {"outcome": r["outcome"], "reason": r["reason"][:400], "torch": torch} for r in report["results"]}


def rate(hits: int, n: int) -> str:
    if not n:
        return "no runs"
    low, high = exact_binomial_interval(hits, n)
    return f"{hits}/{n} (95% CI {low:.2f}-{high:.2f})"


def caught(broken: dict[str, dict], brk: str) -> str:
    runs = [r for k, r in broken.items() if k.startswith(brk + ":")]
    return rate(sum(r["outcome"] == "failed" for r in runs), len(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", action="append", required=True, help="an interpreter with torch (repeatable)")
    parser.add_argument("--models", default=",".join(NEEDS), help="comma-separated, of: " + ", ".join(NEEDS))
    parser.add_argument("--seeds", type=int, default=1, help="weights and inputs per model (default 1)")
    parser.add_argument("--breaks", default="linear-1e-3,linear-grad-5pct", help="harness breakages, comma-separated")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    found: dict[str, dict] = {}
    for python in args.python:
        models = [m for m in args.models.split(",") if importable(python, NEEDS[m])]
        left = sorted(set(args.models.split(",")) - set(models))
        entry = found[python] = {"models": models, "left_out": {m: f"{NEEDS[m]} does not import" for m in left},
                                 "healthy": {}, "broken": {}}
        with tempfile.TemporaryDirectory(prefix="tuc-bounds-") as tmp:
            for seed in range(args.seeds):
                for check, r in run(python, Path(tmp) / f"seed{seed}", models, "numerics, amp", seed).items():
                    entry["healthy"][f"{check}@seed{seed}"] = r
            for brk in filter(None, args.breaks.split(",")):
                wrapped = str(interpreter(python, Path(tmp) / f"py-{brk}", breaks=[brk]))
                for check, r in run(wrapped, Path(tmp) / brk, models, "numerics", 0).items():
                    entry["broken"][f"{brk}:{check}"] = r
        (args.out / "bounds.json").write_text(json.dumps(found, indent=1))
    lines = ["| interpreter | models | healthy numerics passed | healthy amp passed | breakage: numerics failed |",
             "| --- | --- | --- | --- | --- |"]
    for python, e in found.items():
        h = e["healthy"]
        num = [r for k, r in h.items() if "/numerics@" in k]
        amp = [r for k, r in h.items() if "/amp@" in k]
        brk = "; ".join(f"{b}: {caught(e['broken'], b)}" for b in filter(None, args.breaks.split(",")))
        lines.append(f"| {python} | {', '.join(e['models'])} | {rate(sum(r['outcome'] == 'passed' for r in num), len(num))} "
                     f"| {rate(sum(r['outcome'] == 'passed' for r in amp), len(amp))} | {brk} |")
    (args.out / "bounds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    for python, e in found.items():
        for k, r in {**e["healthy"], **e["broken"]}.items():
            print(f"{python} {k}: {r['outcome']}: {r['reason'][:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
