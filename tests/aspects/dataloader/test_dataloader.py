"""The dataloader check: the workload's dataset through DataLoader worker processes under each start method, with
persistent workers off and on, against num_workers=0 (issue 34: about 6 of 30 surveyed upgrade breaks live between
processes). A torch whose spawned workers cannot start, and one whose persistent workers reorder batches, each fail
naming the loader; the real torch passes, alone and against itself in compare; a team's dataset and collate are
loaded as the built-in's are, and a dataset class spawn cannot pickle fails there by name."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli, user_project
from dataloader_rule import judge
from harness import interpreter

from torch_upgrade_check.model import Outcome

CHECK = "mlp[float32]/dataloader"
METHODS = ["fork", "spawn", "forkserver"]  # Linux offers all three


def checked(python: str, out: Path, check: str = CHECK, cwd: Path | None = None) -> dict[str, dict]:
    """`run` of `check` alone with `python` (in `cwd`, with its config): the results by id."""
    proc = run_cli("run", "--python", python, "--device", "cpu", "--only", check, "--out", str(out),
                   "--no-job-summary", cwd=cwd)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return results_by_id(load_report(out))


def outcomes(result: dict) -> list[tuple[str, bool, str]]:
    return [(r["start_method"], r["persistent_workers"], r["outcome"]) for r in result["metrics"]["runs"]]


@pytest.mark.fast  # in the fast tier: one of the few e2e tests that together run every module
def test_the_real_torch_loads_every_batch_as_num_workers_0_under_each_start_method(tmp_path: Path,
                                                                                   torch_python: str) -> None:
    """A/A: six loaders (three start methods, persistent workers off and on), every batch bitwise num_workers=0's
    and in order; the CPU has no pinned memory, and says so."""
    began = time.monotonic()
    result = checked(torch_python, tmp_path)[CHECK]
    assert result["outcome"] == "passed", result["reason"]
    m = result["metrics"]
    assert outcomes(result) == [(method, persistent, "equal") for method in METHODS for persistent in (False, True)]
    assert [r["batches"] for r in m["runs"]] == [8, 16] * 3  # 60 items in batches of 8; persistent: 2 epochs
    assert (m["items"], m["reference_batches"], m["parent_initialised"], m["pin_memory"]) == (60, 16, "cpu", False)
    assert result["reason"].startswith("6 loaders with 2 workers (fork, spawn, forkserver; persistent_workers off: "
                                       "1 epoch, on: 2) gave num_workers=0's batches bitwise and in order")
    assert "pin_memory off (the CPU has no pinned memory" in result["reason"]
    assert time.monotonic() - began < 120


def test_a_worker_that_cannot_start_under_spawn_fails_naming_spawn_and_its_error(tmp_path: Path,
                                                                                 torch_python: str) -> None:
    """Issue 34: DataLoader workers that could not initialise CUDA on 2.11 and 2.13 (NVIDIA/recsys-examples#352,
    vllm-project/speculators#887). Spawned workers raise as they start: both spawn loaders fail with DataLoader's
    own error and the worker's, read back from its stderr; fork and forkserver load as before."""
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["dataloader-spawn-worker-fails"]))
    result = checked(broken, tmp_path / "out")[CHECK]
    assert result["outcome"] == "failed", result["reason"]
    assert outcomes(result) == [("fork", False, "equal"), ("fork", True, "equal"), ("spawn", False, "died"),
                                ("spawn", True, "died"), ("forkserver", False, "equal"), ("forkserver", True, "equal")]
    reason = result["reason"]
    assert reason.startswith("spawn, persistent_workers=False: a worker died: RuntimeError: DataLoader worker"), reason
    assert ("the worker's error: RuntimeError: initialization error: this DataLoader worker cannot start" in reason
            and "1 more of the 6 loaders failed (spawn, persistent_workers=True)" in reason), reason
    assert result["duration_s"] < 100  # a dead worker is noticed at once, not after DataLoader's 60 s timeout


def test_batches_reordered_by_persistent_workers_fail_naming_the_batch(tmp_path: Path, torch_python: str) -> None:
    """From their second epoch, persistent workers' batches come back two by two swapped: every persistent loader
    fails naming the epoch and the batch whose place it took; loaders without persistent workers pass."""
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["dataloader-persistent-reorders"]))
    result = checked(broken, tmp_path / "out")[CHECK]
    assert result["outcome"] == "failed", result["reason"]
    assert outcomes(result) == [(method, persistent, "differs" if persistent else "equal")
                                for method in METHODS for persistent in (False, True)]
    assert result["reason"].startswith(
        "fork, persistent_workers=True: epoch 2, batch 1 came back out of order: it is num_workers=0's batch of the "
        "indices the sampler handed out for batch 2; 2 more of the 6 loaders failed (spawn, persistent_workers=True, "
        "forkserver, persistent_workers=True)"), result["reason"]


def test_on_emulated_cuda_batches_are_pinned_and_a_worker_that_inits_cuda_after_a_fork_fails(tmp_path: Path,
                                                                                            torch_python: str) -> None:
    """Under the CUDA emulation (which refuses CUDA in a child forked from a parent that had initialised it, as torch
    does): the parent initialises CUDA, every loader pins its batches and passes; a torch whose workers initialise
    CUDA as they start (vllm-project/speculators#887 on 2.13) fails both fork loaders with the worker's own error,
    while spawn and forkserver, whose workers start afresh, pass."""
    for breaks in ([], ["dataloader-worker-inits-cuda"]):
        python = str(interpreter(torch_python, tmp_path / f"py{len(breaks)}", emulate="cuda", breaks=breaks))
        proc = run_cli("run", "--python", python, "--device", "cuda", "--only", CHECK, "--out",
                       str(tmp_path / f"out{len(breaks)}"), "--no-job-summary")
        assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
        result = results_by_id(load_report(tmp_path / f"out{len(breaks)}"))[CHECK]
        pinned = [r.get("pinned") for r in result["metrics"]["runs"]]
        if not breaks:
            assert result["outcome"] == "passed", result["reason"]
            assert pinned == [True] * 6 and result["metrics"]["parent_initialised"] == "cuda"
            assert result["reason"].endswith("after the parent initialised cuda); pin_memory on, batches pinned")
            continue
        assert result["outcome"] == "failed", result["reason"]
        assert [o for _, _, o in outcomes(result)] == ["died", "died", "equal", "equal", "equal", "equal"], result["reason"]
        assert result["reason"].startswith("fork, persistent_workers=False, pin_memory on: a worker died: "
                                           "RuntimeError: DataLoader worker"), result["reason"]
        assert ("the worker's error: RuntimeError: Cannot re-initialize CUDA in forked subprocess" in result["reason"]
                and "1 more of the 6 loaders failed (fork, persistent_workers=True, pin_memory on)" in result["reason"])


def test_compare_of_the_same_torch_finds_the_baselines_batches(tmp_path: Path, torch_python: str) -> None:
    """The baseline saves num_workers=0's orders and first epoch; the candidate's are bitwise the same."""
    proc = run_cli("compare", "--baseline-python", torch_python, "--candidate-python", torch_python, "--device",
                   "cpu", "--threads", "1", "--only", CHECK, "--out", str(tmp_path), "--no-job-summary")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    baseline, candidate = (results_by_id(r)[CHECK] for r in load_report(tmp_path)["reports"])
    assert (baseline["metrics"]["mode"], candidate["metrics"]["mode"]) == ("save", "compare")
    assert candidate["outcome"] == "passed" and candidate["metrics"]["vs_baseline"] == "equal", candidate["reason"]
    assert candidate["metrics"]["compared_batches"] == 8
    assert "num_workers=0's 2 epochs are baseline 2.13.0+cpu's: the same order, batches bitwise" in candidate["reason"]


TEAM = '''
import torch
from torch.utils.data import Dataset


class Sentences(Dataset):
    """Token ids of varying lengths and a label: what a collate_fn pads."""

    def __len__(self):
        return 20

    def __getitem__(self, i):
        return {"ids": torch.arange(1 + i % 5) + i, "label": i % 2, "text": f"sentence {i}"}


def pad(items):
    longest = max(len(x["ids"]) for x in items)
    ids = torch.zeros(len(items), longest, dtype=torch.long)
    for row, x in enumerate(items):
        ids[row, :len(x["ids"])] = x["ids"]
    return {"ids": ids, "labels": torch.tensor([x["label"] for x in items]), "texts": [x["text"] for x in items]}


def build():
    model = torch.nn.EmbeddingBag(32, 4)
    return {"model": model, "inputs": (torch.arange(6).view(2, 3),), "dataset": Sentences(), "collate": pad}


def build_local():
    class Local(Sentences):  # defined in the factory: spawn and forkserver cannot pickle it
        pass

    return {**build(), "dataset": Local()}
'''


def test_a_teams_dataset_and_collate_load_through_workers_and_a_local_class_fails_under_spawn(
        tmp_path: Path, torch_python: str) -> None:
    """A factory's `dataset` and `collate` (padding, strings in the batch) are loaded as the built-in's are; a dataset
    class defined inside the factory loads under fork and fails under spawn and forkserver, which pickle it (as
    Python 3.14's new default start method on Linux, forkserver, does)."""
    user_project(tmp_path, {"team": TEAM}, "workloads:\n  - {name: text, factory: 'team:build', aspects: [dataloader]}"
                                           "\n  - {name: local, factory: 'team:build_local', aspects: [dataloader]}\n")
    by_id = checked(torch_python, tmp_path / "out", "*/dataloader", cwd=tmp_path)
    text, local = by_id["text[float32]/dataloader"], by_id["local[float32]/dataloader"]
    assert text["outcome"] == "passed", text["reason"]
    assert (text["metrics"]["collate"], text["metrics"]["dataset"], text["metrics"]["items"]) == ("pad", "Sentences", 20)
    assert local["outcome"] == "failed", local["reason"]
    assert [o for _, _, o in outcomes(local)] == ["equal", "equal", "raised", "raised", "raised", "raised"]
    assert local["reason"].startswith("spawn, persistent_workers=False: the loader raised AttributeError: Can't "
                                      "pickle local object 'build_local.<locals>.Local'"), local["reason"]


def test_a_workload_without_a_dataset_is_skipped_saying_what_to_return(tmp_path: Path, torch_python: str) -> None:
    user_project(tmp_path, {"plain": "import torch\n\ndef build():\n    return torch.nn.Linear(2, 2), (torch.ones(1, 2),)\n"},
                 "workloads:\n  - {name: plain, factory: 'plain:build', aspects: [dataloader]}\n")
    result = checked(torch_python, tmp_path / "out", "plain[float32]/dataloader", cwd=tmp_path)["plain[float32]/dataloader"]
    assert result["outcome"] == "skipped"
    assert result["reason"].startswith("the workload's factory returns no 'dataset': return your training Dataset")


def test_the_candidate_is_held_to_the_baselines_order_and_batches(tmp_path: Path, torch_python: str) -> None:
    """In-process, real torch: the cross-version comparison of num_workers=0's batches with a saved baseline whose
    order, one integer and one float differ: the order and the integer fail, the float fails for the built-in and
    passes within rtol/atol for a team's workload, each said so."""
    import torch

    from torch_upgrade_check.analysis.verdicts import decide
    from torch_upgrade_check.aspects.dataloader import baseline
    from torch_upgrade_check.aspects.dataloader import run as dataloader
    from torch_upgrade_check.model import CheckSpec, Observation
    from torch_upgrade_check.worker import workloads
    from torch_upgrade_check.worker.instance import build

    inst = build(workloads.mlp, "cpu", torch.float32)
    spec = CheckSpec("mlp", "dataloader", "cpu", "float32", params={"mode": "save", "store": str(tmp_path)})
    dataset = dataloader._dataset(inst)
    reference = dataloader._load(dataset, torch.utils.data.default_collate, dataloader.Loader(0, epochs=2),
                                 dataloader.Expected(dataset, torch.utils.data.default_collate), 60.0)
    baseline.save(spec, reference)
    path = baseline.path_of(spec)
    saved = torch.load(path, weights_only=True)
    compare = CheckSpec("mlp", "dataloader", "cpu", "float32", params={"mode": "compare", "store": str(tmp_path)})
    assert baseline.against(compare, inst, reference)["vs_baseline"] == "equal"

    def against(changed: dict, spec: CheckSpec = compare) -> dict:
        torch.save({**saved, **changed}, path)
        return baseline.against(spec, inst, reference)

    orders = [list(reversed(saved["orders"][0])), saved["orders"][1]]
    found = against({"orders": orders})
    assert (found["vs_baseline"], found["first_difference_vs_baseline"]["batch"]) == ("order", 0)
    nudged = [dict(b) for b in saved["batches"]]
    nudged[3]["y"] = nudged[3]["y"] + 1
    found = against({"batches": nudged})
    assert found["first_difference_vs_baseline"] == {"epoch": 1, "batch": 3, "key": "y", "how": found[
        "first_difference_vs_baseline"]["how"]} and "elements differ" in found["first_difference_vs_baseline"]["how"]
    nudged = [dict(b) for b in saved["batches"]]
    nudged[2]["x"] = nudged[2]["x"] * (1 + 1e-7)
    assert against({"batches": nudged})["vs_baseline"] == "batch"  # the built-in: bitwise
    team = CheckSpec("mlp", "dataloader", "cpu", "float32", "team:build", {"mode": "compare", "store": str(tmp_path)})
    found = against({"batches": nudged}, team)
    assert (found["vs_baseline"], found["rounded_leaves"]) == ("within tolerance", 1), found
    runs = [{"start_method": "fork", "persistent_workers": False, "outcome": "equal", "batches": 8}]
    metrics = {"runs": runs, "mode": "compare", "baseline_torch": "2.12.0", "reference_epochs": 2, **found}
    result = decide(team, Observation(id="x", status="ok", metrics=metrics))
    assert result.outcome is Outcome.PASSED and "floating tensors of its batches are not bitwise" in result.reason


def test_a_worker_that_hangs_dies_or_raises_is_bounded_and_named(torch_python: str) -> None:
    """In-process, real torch, forked workers (a dataset of the test's own: fork does not pickle it), with DataLoader's
    timeout at 2 s: a worker that never returns an item times out and is terminated, one killed by a signal is named
    with DataLoader's own error, one whose item raises is named with the worker's exception."""
    import os
    import signal
    import time

    import torch

    from torch_upgrade_check.aspects.dataloader import run as dataloader
    from torch_upgrade_check.aspects.dataloader.judge import Loader, problem

    class Faulty(torch.utils.data.Dataset):
        def __init__(self, fault: str) -> None:
            self.fault = fault

        def __len__(self) -> int:
            return 16

        def __getitem__(self, i: int) -> torch.Tensor:
            if torch.utils.data.get_worker_info() is not None:  # in a worker process only
                if self.fault == "hang":
                    time.sleep(3600)
                if self.fault == "die":
                    os.kill(os.getpid(), signal.SIGKILL)
                if self.fault == "raise":
                    raise ValueError(f"item {i} is corrupt")
            return torch.tensor([i])

    collate = torch.utils.data.default_collate
    for fault, outcome, said in (("hang", "timed out", "no batch within DataLoader's timeout (a worker hung): "
                                                        "RuntimeError: DataLoader timed out after 2.0 seconds"),
                                 ("die", "died", "a worker died: RuntimeError: DataLoader worker (pid"),
                                 ("raise", "raised", "the loader raised ValueError: Caught ValueError in DataLoader "
                                                     "worker process ")):
        dataset = Faulty(fault)
        expected = dataloader.Expected(dataset, collate)
        orders = dataloader._load(dataset, collate, dataloader.Loader(0, epochs=2), expected, 2.0)["orders"]
        began = time.monotonic()
        result = dataloader._checked(dataset, collate, dataloader.Loader(2, "fork"), expected, 2.0, orders)
        said_here = problem(Loader.from_dict(result))
        assert result["outcome"] == outcome and said_here.startswith(said), (fault, said_here)
        assert time.monotonic() - began < 30, fault  # the timeout, then DataLoader's 5 s join before it terminates
        if fault == "die":
            assert "killed by signal: Killed" in result["error"], result["error"]
    said_here = problem(Loader.from_dict(result))
    assert "… ValueError: item " in said_here and said_here.endswith(" is corrupt"), said_here


def run_of(method: str = "spawn", persistent: bool = False, **fields: object) -> dict:
    return {"start_method": method, "persistent_workers": persistent, "pin_memory": False, "num_workers": 2,
            "epochs": 2 if persistent else 1, "batches": 8, "outcome": "equal", **fields}


def metrics_of(*runs: dict, **fields: object) -> dict:
    return {"runs": list(runs), "workers": 2, "batch_size": 8, "items": 60, "reference_epochs": 2,
            "parent_initialised": "cpu", "pin_memory": False, "pin_memory_off": "no pinned memory",
            "batch_timeout_s": 60.0, "wall_s": 200.0, "mode": "alone", **fields}


@pytest.mark.parametrize(("run", "reason"), [
    (run_of(outcome="timed out", error="RuntimeError: DataLoader timed out after 60 seconds"),
     "spawn, persistent_workers=False: no batch within DataLoader's timeout (a worker hung): RuntimeError: DataLoader "
     "timed out after 60 seconds"),
    (run_of("fork", outcome="died", error="RuntimeError: DataLoader worker (pid 7) is killed by signal: Segmentation "
                                          "fault.", worker_error=""),
     "fork, persistent_workers=False: a worker died: RuntimeError: DataLoader worker (pid 7) is killed by signal: "
     "Segmentation fault."),
    (run_of(outcome="raised", error="ValueError: Caught ValueError in DataLoader worker process 1. … ValueError: bad "
                                    "item", worker_error="ValueError: bad item"),
     "spawn, persistent_workers=False: the loader raised ValueError: Caught ValueError in DataLoader worker process 1. "
     "… ValueError: bad item"),
    (run_of(outcome="differs", first_difference={"epoch": 1, "batch": 2, "key": "x", "indices": [4, 9],
                                                 "how": "3 of 64 elements differ (max abs diff 0.5)"}),
     "spawn, persistent_workers=False: epoch 1, batch 3 is not bitwise num_workers=0's batch of the same indices "
     "[4, 9]: x: 3 of 64 elements differ (max abs diff 0.5)"),
    (run_of(outcome="differs", first_difference={"epoch": 1, "batch": 0, "key": "",
                                                 "how": "the sampler handed out indices [1] where num_workers=0's "
                                                        "handed out [2]"}),
     "spawn, persistent_workers=False: epoch 1, batch 1: the sampler handed out indices [1] where num_workers=0's "
     "handed out [2]"),
    (run_of("forkserver", True, outcome="not run", error="the loaders before it spent the check's bound of 200 s"),
     "forkserver, persistent_workers=True: not run: the loaders before it spent the check's bound of 200 s"),
    (run_of(pin_memory=True, pinned=False),
     "spawn, persistent_workers=False, pin_memory on: with pin_memory=True the batches came back outside pinned "
     "memory"),
])
def test_each_way_a_loader_fails_is_one_line_naming_it(run: dict, reason: str) -> None:
    outcome, said, thresholds = judge(metrics_of(run_of("fork"), run))
    assert outcome is Outcome.FAILED and said == f"{reason}; the other 1 loaders gave num_workers=0's batches", said
    assert thresholds["bitwise"] is True and "\n" not in said


def test_the_rule_passes_every_equal_loader_and_fails_nothing_ran_and_the_baselines_differences() -> None:
    outcome, reason, _ = judge(metrics_of(run_of("fork"), run_of("fork", True, batches=16)))
    assert outcome is Outcome.PASSED and reason.startswith("2 loaders with 2 workers (fork; persistent_workers off: 1 "
                                                           "epoch, on: 2) gave num_workers=0's batches bitwise and in "
                                                           "order (24 batches of 8 of 60 items"), reason
    assert judge(metrics_of())[:2] == (Outcome.FAILED, "no DataLoader with workers ran")
    order = {"vs_baseline": "order", "baseline_torch": "2.12.0",
             "first_difference_vs_baseline": {"epoch": 2, "batch": 0, "indices": [3, 1], "baseline_indices": [1, 3]}}
    outcome, reason, thresholds = judge(metrics_of(run_of(), mode="compare", cross_version_rule="bitwise", **order))
    assert outcome is Outcome.FAILED and reason.startswith(
        "the seeded shuffle changed since baseline 2.12.0: epoch 2, batch 1 holds indices [3, 1] here and [1, 3] on "
        "the baseline"), reason
    assert thresholds["cross_version_rule"] == "bitwise"
    batch = {"vs_baseline": "batch", "baseline_torch": "2.12.0",
             "first_difference_vs_baseline": {"epoch": 1, "batch": 4, "key": "y", "how": "1 of 8 elements differ"}}
    outcome, reason, _ = judge(metrics_of(run_of(outcome="died", error="E"), mode="compare", **batch))
    assert outcome is Outcome.FAILED and reason.endswith(
        "; num_workers=0's batch 5 of epoch 1 is not baseline 2.12.0's: y: 1 of 8 elements differ"), reason
    outcome, reason, _ = judge(metrics_of(run_of(), mode="compare", vs_baseline="none"))
    assert outcome is Outcome.PASSED and reason.endswith("the baseline saved no batches (its check did not run, or "
                                                         "failed there): not compared with it")
    assert judge(metrics_of(run_of(), mode="compare"))[0] is Outcome.FAILED  # an old worker: no comparison recorded
