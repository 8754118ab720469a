"""The canary workflow end to end under act with two REAL, different torch builds as the nightly channel.

What is real: the wheels (torch 2.13.0 as pip finds it, and 2.14.1, PyPI's CUDA build, which runs on the CPU), their
installs by the action into the venv store (2.14.1 with its CUDA libraries, ~5.5 GB), the checks the workers run on
them, the history pushed to a local bare repository and read back. What is relabelled: one copy of the 2.13.0 wheel
is given the nightly version 2.14.0.dev<today> (tests/harness/real_channel.py: the wheel's name, dist-info, METADATA
and torch/version.py's `__version__` alone; its libraries and git_version are 2.13.0's), and for night 3 one copy of
the 2.14.1 wheel 2.14.2.dev<today>, with the breakage harness added (2.14.1's files otherwise). Without it, night 1's
`nightly` would resolve to the very build the team pins, and compare stops with exit 2 ("nothing would be compared";
the canary records nothing that night, no new build):
a nightly is never the release a team pins, and the relabel keeps night 1 what it stands for, a nightly that is
2.13.0 inside. 2.14.1 is served as it is: it orders above the dev build, so `nightly` picks it on night 2.
The channel is one index (as a team's mirror of PyTorch's may be) holding the pinned 2.13.0 as well, since the action
installs both sides from the `index-url` it is given.
"""

from __future__ import annotations

import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from act_harness import pip_sources, run_act_event
from test_canary_act import CANARY, act, bare_remote, caller_repo, records_on, repo  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.act, pytest.mark.slow]

CHECKS = "mlp[float32]/numerics,mlp[float32]/cross-version"
HISTORY_STEP = "Read the history and add this run to it"


def channel_env(tmp: Path) -> dict[str, str]:
    """pip's sources for uv, at uv's own index strategy (the first index holding torch serves it), as on a team's
    runner: best-match over every index would take a torch the channel does not serve from the machine's others."""
    env = {k: v for k, v in pip_sources().items() if k != "UV_INDEX_STRATEGY"}
    return {"PIP_DISABLE_PIP_VERSION_CHECK": "1", **env, "XDG_CACHE_HOME": str(tmp / "xdg")}


def test_the_canary_judges_a_real_upgrade_and_records_the_build_change(act: str, repo: Path, tmp_path: Path,  # noqa: F811
                                                                       torch_python: str, request: pytest.FixtureRequest) -> None:
    """Night 1: the channel's newest build is 2.13.0 inside (relabelled a nightly): passes, one record, no alarm.
    Night 2: the channel has 2.14.1, the real CUDA build, run on this CPU: the numerics and cross-version checks pass
    on the real upgrade (a healthy upgrade does not cry wolf), the record names 2.14.1's own version and commit, and
    the history's summary says the candidate's build changed.
    Night 3: the channel has 2.14.1 broken as the breakage harness breaks torch (`linear-1e-3`: a .pth in a relabelled
    copy, 2.14.2.dev<today>, puts tests/harness/site's sitecustomize first): both checks fail, the history alarms
    (last good 2.14.1, first bad 2.14.2.dev), and the bisection, with no build between them in the channel, judges
    the bad build against the good one and names it the first bad build, in the summary and the record. (It was
    handed 2.14.1+cu130, torch.__version__ of a wheel versioned 2.14.1, and ran nothing, before the workflow passed
    public versions.)"""
    from harness import SITE
    from harness.real_channel import broken_files, real_wheel, relabel, write_channel

    started = time.monotonic()
    request.addfinalizer(lambda: [shutil.rmtree(tmp_path / big, ignore_errors=True)  # the venv store (xdg) and the
                                  for big in ("xdg", "night-3", "wheels", "relabelled", "channel")])  # wheels: GBs
    today = datetime.now(timezone.utc).strftime("%Y%m%d")  # the tool refuses a nightly days old
    pinned = real_wheel(torch_python, "2.13.0", tmp_path / "wheels")
    upgrade = real_wheel(torch_python, "2.14.1", tmp_path / "wheels")
    nightly = relabel(pinned, f"2.14.0.dev{today}", tmp_path / "relabelled")
    broken = relabel(upgrade, f"2.14.2.dev{today}", tmp_path / "relabelled", broken_files(SITE, "linear-1e-3"))
    remote = bare_remote(tmp_path / "history.git")
    runners = f'[{{"labels": ["ubuntu-latest"], "python": "{torch_python}", "device": "cpu"}}]'
    env = channel_env(tmp_path)

    def night(n: int, wheels: list[Path]):
        url = write_channel(tmp_path / "channel", [pinned, *wheels])
        caller = caller_repo(tmp_path / f"caller-{n}", {"requirements.txt": "torch==2.13.0\n"})
        inputs = {"candidate": "nightly", "runners": runners, "checks": CHECKS, "index-url": url}
        shutil.rmtree(tmp_path / f"night-{n - 1}", ignore_errors=True)  # its act run's files
        return run_act_event(act, caller, "workflow_dispatch", {"inputs": inputs}, CANARY, tmp=tmp_path / f"night-{n}",
                             repo=repo, env=env, variables={"TORCH_CANARY_REMOTE": str(remote)}, timeout_s=2400)

    first = night(1, [nightly])
    assert first.job("canary on") == "success" and first.job("publish") == "success", first.explain()
    assert first.step_outputs("canary on", HISTORY_STEP).get("alarm") == "false", first.explain()
    (one,) = records_on(remote, tmp_path)
    assert one["torch"]["baseline"]["version"].startswith("2.13.0"), one["torch"]
    assert one["torch"]["candidate"]["version"].startswith(f"2.14.0.dev{today}"), one["torch"]
    assert one["torch"]["candidate"]["git"] == one["torch"]["baseline"]["git"], one["torch"]  # 2.13.0 inside
    assert {c: v["outcome"] for c, v in one["checks"].items()} == dict.fromkeys(CHECKS.split(","), "passed"), one

    second = night(2, [nightly, upgrade])
    assert second.job("canary on") == "success" and second.job("publish") == "success", second.explain()
    history = second.step_outputs("canary on", HISTORY_STEP)
    assert history.get("alarm") == "false", second.explain()
    _, two = records_on(remote, tmp_path)
    candidate = two["torch"]["candidate"]
    assert candidate["version"].startswith("2.14.1") and candidate["build_date"] is None, candidate
    assert candidate["git"] and candidate["git"] != one["torch"]["candidate"]["git"], (candidate, one["torch"])
    assert {c: v["outcome"] for c, v in two["checks"].items()} == dict.fromkeys(CHECKS.split(","), "passed"), two
    summary = "\n".join(second.summaries("canary on"))
    assert f"Candidate build changed: {candidate['version']}" in summary.replace("\\", ""), summary[-3000:]

    third = night(3, [nightly, upgrade, broken])
    assert third.job("canary on") == "failure", third.explain()  # the candidate failed: the job says so, last
    assert third.job("publish") == "success", third.explain()
    history = third.step_outputs("canary on", HISTORY_STEP)
    assert history.get("alarm") == "true", third.explain()
    assert history.get("last-good", "").startswith("2.14.1"), history
    assert history.get("first-bad", "").startswith(f"2.14.2.dev{today}"), history
    summary = "\n".join(third.summaries("canary on")).replace("\\", "")
    # nothing lies between the two builds in the channel: the bisection judges the bad build against the good one
    # (the failure reproduces) and names it, the only candidate, as the first bad build
    assert f"Bisection: found, first bad build `2.14.2.dev{today}` (last good `2.14.1`)" in summary.replace("*", ""), \
        summary[-3000:]
    _, _, three = records_on(remote, tmp_path)
    assert three["torch"]["candidate"]["git"] == candidate["git"], three["torch"]  # 2.14.1 inside, broken
    assert three["checks"]["mlp[float32]/numerics"]["outcome"] == "failed", three["checks"]
    assert (three["bisect"]["outcome"], three["bisect"]["last_good"], three["bisect"]["first_bad"]) == (
        "found", "2.14.1", f"2.14.2.dev{today}"), three["bisect"]
    print(f"the canary on two real builds: {time.monotonic() - started:.0f} s in all",  # the added CI time
          file=sys.stderr)
