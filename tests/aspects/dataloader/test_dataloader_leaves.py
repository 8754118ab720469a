"""The dataloader check reads a batch by content whatever the team's collate returns (issue 46 items 2 and 4): a
dataclass, a namedtuple (by field name), numpy arrays, objects; a worker that corrupts element 5000 of a tensor
inside any of them fails naming it, against num_workers=0 and against the baseline, where a repr (which torch and
numpy summarise) saw nothing; an object it cannot read is said so, never passed silently; and a 0-element tensor
(an image with no boxes) is not judged for pinning."""

from __future__ import annotations

import threading
from pathlib import Path

from conftest import load_report, results_by_id, run_cli, user_project
from dataloader_rule import judge
from harness import interpreter

from torch_upgrade_check.model import Outcome

TEAM = '''
import collections
import dataclasses

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info


class Images(Dataset):
    """3x16x16 images (768 elements: a batch of 8 stacks 6144, element 5000 in its 7th image) and 0 to 2 boxes each:
    every third image has none, a [0, 4] tensor."""

    def __len__(self):
        return 24

    def __getitem__(self, i):
        image = (torch.arange(768, dtype=torch.float32).view(3, 16, 16) + i) / 768
        return image, torch.full((i % 3, 4), float(i)), i


@dataclasses.dataclass
class Batch:
    images: torch.Tensor
    boxes: list
    labels: torch.Tensor


Pair = collections.namedtuple("Pair", ["images", "labels"])


def as_dataclass(items):
    return Batch(torch.stack([x[0] for x in items]), [x[1] for x in items], torch.tensor([x[2] for x in items]))


def as_namedtuple(items):
    return Pair(torch.stack([x[0] for x in items]), torch.tensor([x[2] for x in items]))


def as_numpy(items):
    return {"images": np.stack([x[0].numpy() for x in items]), "labels": np.array([x[2] for x in items])}


def as_numpy_corrupted_in_workers(items):
    batch = as_numpy(items)
    if get_worker_info() is not None:  # in a worker process only: num_workers=0's batch is right
        batch["images"].flat[5000] += 1
    return batch


def detection(items):
    return torch.stack([x[0] for x in items]), tuple(x[1] for x in items)


def factory(collate):
    def build():
        return {"model": torch.nn.Linear(2, 2), "inputs": (torch.ones(1, 2),), "dataset": Images(),
                "collate": collate}
    return build


dataclass_batch, namedtuple_batch, numpy_batch = factory(as_dataclass), factory(as_namedtuple), factory(as_numpy)
numpy_corrupted, detection_batch = factory(as_numpy_corrupted_in_workers), factory(detection)
'''
WORKLOADS = ("dataclass_batch", "namedtuple_batch", "numpy_batch", "numpy_corrupted", "detection_batch")


def team(folder: Path, *names: str) -> None:
    user_project(folder, {"team": TEAM}, "workloads:\n" + "".join(
        f"  - {{name: {n}, factory: 'team:{n}', aspects: [dataloader]}}\n" for n in names))


def checked(python: str, folder: Path, device: str = "cpu") -> dict[str, dict]:
    proc = run_cli("run", "--python", python, "--device", device, "--only", "*/dataloader", "--out",
                   str(folder / "out"), "--no-job-summary", cwd=folder)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return {k.split("[")[0]: v for k, v in results_by_id(load_report(folder / "out")).items()}


def test_a_worker_that_corrupts_element_5000_inside_a_dataclass_or_namedtuple_fails_naming_the_field(
        tmp_path: Path, torch_python: str) -> None:
    """Every tensor a worker sends back arrives with element 5000 one larger: the dataclass's and the namedtuple's
    `images` fail in every loader, by field name (a repr of a 6144-element tensor does not show element 5000)."""
    team(tmp_path, "dataclass_batch", "namedtuple_batch")
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["dataloader-worker-corrupts-element-5000"]))
    by_name = checked(broken, tmp_path)
    for name in ("dataclass_batch", "namedtuple_batch"):
        result = by_name[name]
        assert result["outcome"] == "failed", (name, result["reason"])
        assert [r["outcome"] for r in result["metrics"]["runs"]] == ["differs"] * 6, name
        assert result["reason"].startswith("fork, persistent_workers=False: epoch 1, batch 1 is not bitwise "
                                           "num_workers=0's batch of the same indices"), result["reason"]
        assert ": images: 1 of 6144 elements differ (max abs diff 1)" in result["reason"], result["reason"]


def test_healthy_dataclass_namedtuple_and_numpy_batches_pass_and_numpy_corrupted_in_workers_fails(
        tmp_path: Path, torch_python: str) -> None:
    """A/A on the real torch: the dataclass (with lists of boxes, empty ones among them), the namedtuple and the numpy
    batches pass, read by content (the field names and numpy's type are leaves); numpy arrays corrupted at element
    5000 in worker processes only fail naming `images` (numpy's repr of 6144 elements summarises too)."""
    team(tmp_path, "dataclass_batch", "namedtuple_batch", "numpy_batch", "numpy_corrupted")
    by_name = checked(torch_python, tmp_path)
    for name in ("dataclass_batch", "namedtuple_batch", "numpy_batch"):
        assert by_name[name]["outcome"] == "passed", (name, by_name[name]["reason"])
        assert "could not be read" not in by_name[name]["reason"]
    bad = by_name["numpy_corrupted"]
    assert bad["outcome"] == "failed" and [r["outcome"] for r in bad["metrics"]["runs"]] == ["differs"] * 6
    assert ": images: 1 of 6144 elements differ (max abs diff 1)" in bad["reason"], bad["reason"]


def test_an_empty_boxes_tensor_is_not_judged_for_pinning_under_emulated_cuda(tmp_path: Path,
                                                                            torch_python: str) -> None:
    """An image with no boxes: a [0, 4] tensor, which no pinned memory holds (is_pinned() is False after
    pin_memory(), as on CUDA): every loader pins the rest and passes. A dataclass without a pin_memory method is
    left as it is by DataLoader: its tensors are named as not judged, and it passes."""
    team(tmp_path, "detection_batch", "dataclass_batch")
    by_name = checked(str(interpreter(torch_python, tmp_path / "py", emulate="cuda")), tmp_path, "cuda")
    detection, dataclass = by_name["detection_batch"], by_name["dataclass_batch"]
    assert detection["outcome"] == "passed", detection["reason"]
    assert [r.get("pinned") for r in detection["metrics"]["runs"]] == [True] * 6
    assert detection["reason"].endswith("pin_memory on, batches pinned"), detection["reason"]
    assert dataclass["outcome"] == "passed", dataclass["reason"]
    assert ("pin_memory on, but no batch held a tensor DataLoader pins: pinning not judged (tensors inside types "
            "without a pin_memory method, which DataLoader leaves as they are, not judged: images, boxes["
            in dataclass["reason"]), dataclass["reason"]


def test_the_candidate_is_held_to_the_baselines_dataclass_namedtuple_and_numpy_batches(tmp_path: Path) -> None:
    """In-process, real torch: the baseline saves num_workers=0's batches of each kind; a candidate whose collate
    gives element 5000 one larger fails against it naming the field, and the same batches are equal."""
    import importlib.util
    import sys

    import torch

    from torch_upgrade_check.aspects.dataloader import baseline
    from torch_upgrade_check.aspects.dataloader import run as dataloader
    from torch_upgrade_check.model import CheckSpec
    from torch_upgrade_check.worker import workloads
    from torch_upgrade_check.worker.instance import build

    (tmp_path / "team_leaves.py").write_text(TEAM)
    spec_ = importlib.util.spec_from_file_location("team_leaves", tmp_path / "team_leaves.py")
    assert spec_ is not None and spec_.loader is not None
    mod = importlib.util.module_from_spec(spec_)
    sys.modules["team_leaves"] = mod
    spec_.loader.exec_module(mod)
    inst = build(workloads.mlp, "cpu", torch.float32)
    dataset = mod.Images()

    def reference(c):
        return dataloader._load(dataset, c, dataloader.Loader(0, epochs=2), dataloader.Expected(dataset, c), 60.0)

    def corrupted(collate):
        def collate_nudged(items):
            batch = collate(items)
            images = batch["images"] if isinstance(batch, dict) else batch.images
            images.reshape(-1)[5000] += 1
            return batch
        return collate_nudged

    for n, collate in enumerate((mod.as_dataclass, mod.as_namedtuple, mod.as_numpy)):
        store = {"store": str(tmp_path / str(n))}
        save = CheckSpec("team", "dataloader", "cpu", "float32", "team:build", {"mode": "save", **store})
        compare = CheckSpec("team", "dataloader", "cpu", "float32", "team:build", {"mode": "compare", **store})
        baseline.save(save, reference(collate))
        assert baseline.against(compare, inst, reference(collate))["vs_baseline"] == "equal", collate
        found = baseline.against(compare, inst, reference(corrupted(collate)))
        assert found["vs_baseline"] == "batch", (collate, found)
        d = found["first_difference_vs_baseline"]
        assert (d["key"], d["how"]) == ("images", "1 of 6144 elements differ (max abs diff 1)"), (collate, d)


def test_an_object_it_cannot_read_is_said_so_and_a_batch_of_nothing_readable_is_skipped() -> None:
    """A lock (no state pickle carries, no __dict__) is a leaf saying so, by type; the rule names it beside a pass,
    and a batch with nothing read at all is skipped, not passed."""
    import torch

    from torch_upgrade_check.aspects.dataloader import leaves as batchleaves

    read = batchleaves.read({"x": torch.ones(2), "lock": threading.Lock()})
    assert read.leaves["lock"] == "<not read> _thread.lock" and list(read.unread) == ["lock"]
    assert read.unread["lock"].startswith("_thread.lock: pickle refuses it (TypeError: cannot pickle")
    run = {"start_method": "fork", "persistent_workers": False, "outcome": "equal", "batches": 8, "epochs": 1}
    metrics = {"runs": [run], "workers": 2, "mode": "alone", "unread_leaves": read.unread, "unread_count": 1}
    outcome, reason, _ = judge({**metrics, "read_leaves": 1})
    assert outcome is Outcome.PASSED and reason.endswith(
        "; 1 batch leaves could not be read, only their types compared (lock: _thread.lock: pickle refuses it "
        "(TypeError: cannot pickle '_thread.lock' object) and it has no __dict__)"), reason
    outcome, reason, _ = judge({**metrics, "read_leaves": 0})
    assert outcome is Outcome.SKIPPED and reason.startswith("nothing in the batches could be compared: 1 batch "), reason


def test_the_tensors_inside_a_type_with_its_own_pin_memory_are_judged_and_a_plain_dataclass_is_left_alone() -> None:
    """DataLoader's pin_memory calls a batch type's own pin_memory (torch's documented way for a custom batch), so
    its tensors are judged; a dataclass without one is returned as it is, so its tensors are named, not judged; a
    0-element tensor is neither."""
    import dataclasses

    import torch

    from torch_upgrade_check.aspects.dataloader import leaves as batchleaves

    @dataclasses.dataclass
    class Plain:
        images: torch.Tensor
        boxes: torch.Tensor

    @dataclasses.dataclass
    class Pinnable(Plain):
        def pin_memory(self) -> Pinnable:
            return Pinnable(self.images.pin_memory(), self.boxes.pin_memory())

    for batch, pinnable, alone in (({"b": Pinnable(torch.ones(2), torch.zeros(0, 4))}, ["b.images"], []),
                                   ({"b": Plain(torch.ones(2), torch.ones(1, 4))}, [], ["b.images", "b.boxes"])):
        read = batchleaves.read(batch)
        assert ([k for k, _ in read.pinnable], read.not_reached) == (pinnable, alone), type(batch["b"])
        assert read.leaves["b.__class__"].endswith(type(batch["b"]).__qualname__)
