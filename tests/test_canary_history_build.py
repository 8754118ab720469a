"""The canary's history says which candidate build a run judged and whether it changed since the run before.

A series that steps on the night the build changed points at the build; one that steps on the same build points at
the runner or the noise. The end-to-end proof on two real builds (2.13.0 inside a nightly's label, then 2.14.1) is
tests/action/test_canary_real_builds_act.py; these are the pure parts on records as `history --append` makes them.
"""

from __future__ import annotations

from history_cases import IDENTITY, comparison, correctness, load

from torch_upgrade_check.analysis.trends import analyse
from torch_upgrade_check.history.record import from_report
from torch_upgrade_check.report.history import render_markdown, to_document


def record(candidate: str, n: int, identity: dict | None = None) -> dict:
    report = load(comparison("2.13.0+cpu", candidate, correctness("mlp")))
    return from_report(report, identity=identity or IDENTITY, commit=f"{n:040x}", when=f"2026-12-0{n}T04:17:00Z")


def test_a_new_candidate_build_is_named_with_the_one_before() -> None:
    history = analyse([record("2.14.0.dev20261205+cpu", 1), record("2.14.1+cu130", 2)])
    markdown = render_markdown(history, {}).replace("\\", "")
    assert "Candidate build changed: 2.14.1+cu130 (git 0123456789ab), was 2.14.0.dev20261205+cpu (git " in markdown
    assert "No check changed" in markdown  # a new build alone is no finding, and no alarm
    assert to_document(history, [])["build"].startswith("candidate build changed: 2.14.1+cu130")


def test_the_same_build_again_and_a_first_run_say_so() -> None:
    same = analyse([record("2.14.1+cu130", 1), record("2.14.1+cu130", 2)])
    assert "Candidate build 2.14.1+cu130 (git 0123456789ab): the same as the run before." in \
        render_markdown(same, {}).replace("\\", "")
    first = analyse([record("2.14.1+cu130", 1)])
    assert first.build == "candidate build 2.14.1+cu130 (git 0123456789ab): the first run on this runner"


def test_the_run_before_is_this_runners() -> None:
    """Another runner's run in between is not 'the run before': builds are compared on one runner's series."""
    other = {**IDENTITY, "cpu": "Apple M2"}
    history = analyse([record("2.14.1+cu130", 1), record("2.14.0.dev20261205+cpu", 2, other),
                       record("2.14.1+cu130", 3)])
    assert history.build == "candidate build 2.14.1+cu130 (git 0123456789ab): the same as the run before"
