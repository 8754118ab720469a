"""The numerics and amp bounds on real models (transformers' BERT, GPT-2, ViT, ResNet and MobileNetV2, small
configs, untrained): a healthy torch passes, and a 0.1% kernel change on a 12-block ViT still fails numerics.

Before the bounds scaled with the model's own rounding error, every model here failed one of the two on torch
2.13.0: BERT's, GPT-2's and the ViT's float32 gradients had elements outside rtol/atol (fp32 accumulation), the
ResNet's float16 step was 64.4 unit roundoffs off (bound 64), MobileNetV2's float16 output 2,048 (its activations
underflow), and BERT's float16 gradients did not overflow at 2^40, so the step the GradScaler rightly applied was
counted as one it wrongly applied. (timm and torchvision need torch 2.14.1 beside 2.13.0's CPU wheel:
benchmarks/bounds.py measures those.)"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli
from harness import interpreter

pytest.importorskip("transformers", reason="the test extras install transformers: pip install -e '.[test]'")
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("torch_python")]

MODELS = textwrap.dedent('''\
    """Real model code from transformers, small configs, random weights, with a loss."""
    import torch


    def _with_loss(model, inputs):
        def loss(out):
            hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out
            return hidden.float().square().mean()
        return {"model": model.eval(), "inputs": inputs, "loss": loss}


    def bert():
        from transformers import BertConfig, BertModel
        cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
        return _with_loss(BertModel(cfg), (torch.randint(0, 1000, (2, 32)),))


    def gpt2():
        from transformers import GPT2Config, GPT2Model
        cfg = GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=4, n_head=4, resid_pdrop=0.0,
                         embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        return _with_loss(GPT2Model(cfg), (torch.randint(0, 1000, (2, 32)),))


    def vit12():
        """vit_tiny's width and depth (12 blocks of 192), on 64x64 images: fp32 accumulation through 12 blocks."""
        from transformers import ViTConfig, ViTModel
        cfg = ViTConfig(hidden_size=192, num_hidden_layers=12, num_attention_heads=3, intermediate_size=768,
                        image_size=64, patch_size=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        return _with_loss(ViTModel(cfg, add_pooling_layer=False), (torch.randn(2, 3, 64, 64),))


    def resnet():
        from transformers import ResNetConfig, ResNetModel
        cfg = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64], depths=[1, 1, 1])
        return _with_loss(ResNetModel(cfg), (torch.randn(2, 3, 64, 64),))


    def mobilenet_v2():
        from transformers import MobileNetV2Config, MobileNetV2Model
        return _with_loss(MobileNetV2Model(MobileNetV2Config(depth_multiplier=0.35)), (torch.randn(2, 3, 64, 64),))
    ''')
# the 12-block ViT runs numerics only: its amp step (two autocast dtypes, each with its fp64 yardstick) costs minutes
WORKLOADS = {"bert": "numerics, amp", "gpt2": "numerics, amp", "vit12": "numerics", "resnet": "numerics, amp",
             "mobilenet_v2": "numerics, amp"}


def team(folder: Path, workloads: dict[str, str]) -> Path:
    """A team's repository in `folder` whose config runs each workload's aspects (comma-separated)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "real_models.py").write_text(MODELS)
    (folder / "torch-upgrade-check.yml").write_text("version: 1\nsuite: none\npython-path: [.]\nworkloads:\n" + "".join(
        f"  - name: {w}\n    factory: real_models:{w}\n    aspects: [{aspects}]\n    dtypes: [float32]\n"
        for w, aspects in workloads.items()))
    return folder


def run(python: str, folder: Path) -> tuple[int, dict[str, dict]]:
    proc = run_cli("run", "--python", python, "--device", "cpu", "--out", str(folder / "out"), "--no-job-summary",
                   "--timeout", "900", cwd=folder, timeout=3000)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.returncode, results_by_id(load_report(folder / "out"))


def test_real_models_pass_numerics_and_amp_on_a_healthy_torch(tmp_path: Path, torch_python: str) -> None:
    code, by_id = run(torch_python, team(tmp_path, WORKLOADS))
    assert {k: r["outcome"] for k, r in by_id.items()} == {f"{w}[float32]/{a.strip()}": "passed"
                                                            for w, aspects in WORKLOADS.items()
                                                            for a in aspects.split(",")}, \
        {k: r["reason"][:600] for k, r in by_id.items() if r["outcome"] != "passed"}
    assert code == 0
    # the yardstick was read, not bypassed: some tensors pass by it that rtol/atol alone would fail
    assert any("the model's own float32 rounding error" in by_id[f"{w}[float32]/numerics"]["reason"] for w in WORKLOADS)
    # MobileNetV2's float16 activations underflow, as torchvision's mobilenet_v3_small's do: its output's error is
    # the model's own, far beyond 64 unit roundoffs; BERT's float16 gradients overflow only at a larger scale
    assert "1× the model's own float16 rounding error" in by_id["mobilenet_v2[float32]/amp"]["reason"]
    assert "an overflow at scale 2^64 skipped" in by_id["bert[float32]/amp"]["reason"]


def test_a_0_1_percent_linear_kernel_change_fails_numerics_on_a_12_block_vit(tmp_path: Path, torch_python: str) -> None:
    """linear-1e-3: every nn.functional.linear output x1.001 in float32 (float64, the golden's, exact), as a GEMM
    library update would: judged against the model's own float32 rounding error, far beyond it."""
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["linear-1e-3"]))
    code, by_id = run(broken, team(tmp_path / "team", {"vit12": "numerics"}))
    result = by_id["vit12[float32]/numerics"]
    assert (code, result["outcome"]) == (1, "failed"), result["reason"]
    assert "the model's own float32 rounding error" in result["reason"], result["reason"]
    worst = max(t["rmse"] / t["model_rmse"] for t in result["metrics"]["per_tensor"] if "model_rmse" in t)
    assert worst > 20, worst  # a change hundreds of times the model's own error, not one at the edge of the bound
