"""The bisect command: the first bad torch build between a good and a bad one (no torch here).

Each build is judged by `compare` itself, run as a child process with the good build as its baseline and
the build as its candidate, on the checks `--only` selects: a build is bad when compare fails (a
correctness failure, a cross-version difference, a latency or memory regression, as `--fail-on` says),
good when it passes and nothing is `suspicious`, and skipped when it cannot be judged (its install fails,
or a suspicious A/B stays suspicious when measured again). Installs go through compare's venv store, so a
build judged twice is installed once. Every step's compare output stays under OUT/steps/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from torch_upgrade_check import __version__, github, stack, values
from torch_upgrade_check.analysis import bisect as search
from torch_upgrade_check.aspects import AB_ASPECTS, part
from torch_upgrade_check.commands import argv as command_line
from torch_upgrade_check.commands.common import PROG, say
from torch_upgrade_check.commands.settings import BisectSettings
from torch_upgrade_check.errors import EXIT_INFRA, EXIT_PASSED, UsageError
from torch_upgrade_check.model import Bisection, BisectStep, CheckResult, Outcome, Report
from torch_upgrade_check.orchestrate import builds as listing
from torch_upgrade_check.orchestrate import provision, session, store
from torch_upgrade_check.schema import SchemaError, read_reports, write_bisection

GITHUB_COMPARE = "https://github.com/pytorch/pytorch/compare/{good}...{bad}"


def execute(s: BisectSettings, argv: Sequence[str]) -> int:
    """Bisect between the good and the bad build; `argv` (bisect's own, as typed) is recorded in the report."""
    todo, index_url, outside = _builds(s)
    out = Path(s.out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "steps", ignore_errors=True)  # a previous bisection's steps would read as this one's
    if outside:  # a release as the good build of a nightly range: installed here, from its own channel
        todo[0] = listing.Build(todo[0].label, _prepare(s, todo[0].label, out))
    record = Bisection(tool_version=__version__, command=[PROG, "bisect", *argv], started=session.now(),
                       device=s.device, checks=list(s.only), builds=[b.label for b in todo])
    steps: dict[int, BisectStep] = {}
    started = time.monotonic()

    def save(**changes: object) -> Bisection:
        nonlocal record
        record = replace(record, steps=tuple(steps[i] for i in sorted(steps)),
                         installs=_installs(todo, steps) + int(outside),
                         **changes)
        write_bisection(record, out / "report.json")
        return record

    say(f"{PROG} {__version__} bisect: {len(todo)} builds from {todo[0].label} (good) to {todo[-1].label} (bad), "
        f"at most {search.max_steps(len(todo))} judged; results -> {out}/")
    # the premise first: the bad build fails (and the good one, compare's baseline there, passes by itself)
    last = len(todo) - 1
    steps[last], baseline = _judge(s, todo, last, out, index_url)
    steps[0] = _good_step(todo[0], baseline)
    if steps[0].verdict != "good":
        _finish(s, save(outcome="not-reproduced", reason=steps[0].reason, finished=session.now()), out)
        raise UsageError(steps[0].reason)
    if steps[last].verdict == "good":
        reason = (f"the failure does not reproduce on {todo[last].label}: nothing to bisect (the selected checks "
                  f"pass there against {todo[0].label})")
        _finish(s, save(outcome="not-reproduced", reason=reason, finished=session.now()), out)
        raise UsageError(reason)
    if steps[last].verdict == "skip":
        reason = f"the bad build {todo[last].label} could not be judged: {steps[last].reason}"
        _finish(s, save(outcome="error", reason=reason, finished=session.now()), out)
        print(f"{PROG}: infrastructure error: {reason}", file=sys.stderr)
        return EXIT_INFRA
    save()
    verdicts = {0: "good", last: "bad"}
    while (i := search.next_build(verdicts, len(todo))) is not None:
        steps[i], _ = _judge(s, todo, i, out, index_url)
        verdicts[i] = steps[i].verdict
        save()
    found = search.found(verdicts, len(todo))
    good, bad = steps[found.last_good], steps[found.first_bad]
    url = (GITHUB_COMPARE.format(good=good.git, bad=bad.git)
           if _is_commit(good.git) and _is_commit(bad.git) and good.git != bad.git else "")
    between = [todo[i].label for i in found.skipped_between]
    reason = (f"first bad build: {bad.build} (last good: {good.build})" if found.exact else
              f"the first bad build is one of {', '.join([*between, bad.build])} (last good: {good.build}; "
              "the builds between could not be judged)")
    final = save(outcome="found" if found.exact else "range", reason=reason, last_good=good.build,
                 first_bad=bad.build, skipped_between=between, compare_url=url, finished=session.now())
    _finish(s, final, out)
    say(f"{PROG}: {reason}; {len(steps)} builds judged in {time.monotonic() - started:.0f}s; "
        f"report: {out / 'report.json'}")
    return EXIT_PASSED


def _builds(s: BisectSettings) -> tuple[list[listing.Build], str, bool]:
    """The builds in order, oldest (good) first, the index they are installed from ("" for --builds), and whether
    the good build is a release that index does not hold (a nightly range's: `--good 2.13.0`), which then
    comes first, before every listed build after it."""
    if s.builds:
        if s.good or s.bad:
            raise UsageError("give either --builds FILE or --good SPEC --bad SPEC, not both")
        return listing.read_builds(Path(s.builds)), "", False
    if not (s.good and s.bad):
        raise UsageError("bisect needs --good VERSION and --bad VERSION (to list the builds between them from "
                         "the index), or --builds FILE (the builds in order, oldest first)")
    for flag, value in (("--good", s.good), ("--bad", s.bad)):
        if not listing.is_version(value):
            raise UsageError(f"{flag} must be a torch version like 2.14.0.dev20261115 or 2.13.1, got {value!r}")
    index_url = s.index_url or provision.index_for(
        provision.check_backend(s.torch_backend), _channel(s.bad), provision.detect_cuda_driver())
    if not index_url:
        raise UsageError("the installer's configured index cannot be listed here; pass --index-url URL (a PEP 503 "
                         "simple index, e.g. https://download.pytorch.org/whl/nightly/cpu) or --builds FILE")
    listed = listing.list_versions(index_url)
    outside = ".dev" not in s.good and s.good.split("+")[0] not in {v.split("+")[0] for v in listed}
    if outside:
        listed = sorted([*listed, s.good], key=listing.sort_key)
    versions = listing.between(listed, s.good, s.bad)
    return [listing.Build(v.split("+")[0]) for v in versions], index_url, outside


def _prepare(s: BisectSettings, version: str, out: Path) -> str:
    """Install (or reuse from the venv store) a good release that the builds' index does not hold, from the
    index its own channel uses (not --index-url); every step then takes it as a prepared interpreter."""
    from torch_upgrade_check.commands.compare_sides import pythons_for

    cap = store.DEFAULT_CAP_GB if s.venv_cap is None else values.gigabytes(s.venv_cap, "--venv-cap")
    spec = provision.parse_spec(version, "--good")
    return pythons_for({"good": (spec, None)}, replace(s, index_url=""), session.resolve_python(s.python), out,
                       venv_cap_gb=cap, stack=stack.requested(None, s.requirements, s.extras))["good"]


def _channel(version: str) -> provision.TorchSpec:
    kind = "nightly" if ".dev" in version else "test" if "rc" in version else "version"
    return provision.TorchSpec(version, kind, f"torch=={version}")


def _judge(s: BisectSettings, todo: Sequence[listing.Build], i: int, out: Path,
           index_url: str) -> tuple[BisectStep, Report | None]:
    """Judge build i against the good build; a suspicious A/B is measured once more before the build is skipped."""
    build = todo[i]
    say(f"bisect: judging {build.label} ({i} of {len(todo) - 1}) against {todo[0].label}")
    started = time.monotonic()
    step, baseline, unsettled = _compare(s, todo[0], build, i, out / "steps" / f"{i:02d}", index_url, s.only)
    if unsettled:
        say(f"bisect: {build.label}: {len(unsettled)} check(s) suspicious; measuring them again in fresh processes")
        step, _, unsettled = _compare(s, todo[0], build, i, out / "steps" / f"{i:02d}-again", index_url, unsettled)
        if unsettled:
            step = replace(step, verdict="skip", reason="could not settle " + step.reason)
    step = replace(step, seconds=round(time.monotonic() - started, 1))
    say(f"bisect: {build.label} is {step.verdict.upper()}: {step.reason}")
    return step, baseline


def _compare(s: BisectSettings, good: listing.Build, build: listing.Build, i: int, folder: Path,
             index_url: str, only: Sequence[str]) -> tuple[BisectStep, Report | None, list[str]]:
    """One compare child; (the step, the baseline's report, the ids still suspicious)."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "torch_upgrade_check", *command_line.bisect_step(s, good, build, folder, index_url, only)]
    log = folder / "compare.log"
    with log.open("w", encoding="utf-8") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=github.quiet_environ(os.environ), check=False)
    text = log.read_text(encoding="utf-8", errors="replace")
    if proc.returncode == 2:  # the same flags every step: a usage error is the user's, say it as compare did
        problems = [ln.split(": error: ", 1)[1] for ln in text.splitlines() if f"{PROG}: error: " in ln]
        raise UsageError(*(problems or [f"compare refused the step's command; see {log}"]))
    reports = _read(folder / "report.json")
    cand = next((r for r in reports if r.role == "candidate"), None)
    base = next((r for r in reports if r.role == "baseline"), None)
    date = str(build.date or "")
    if cand is None or cand.infra_error or proc.returncode not in (0, 1):
        why = (cand.infra_error if cand is not None and cand.infra_error else _last_line(text)).splitlines()[0]
        if base is not None and base.infra_error and (cand is None or not cand.infra_error):
            why = f"the good build: {base.infra_error.splitlines()[0]}"
        return BisectStep(i, build.label, "skip", f"could not be judged: {why} (log: {log})", date=date), base, []
    git = str(cand.environment.get("torch_git") or "")
    if proc.returncode == 1:
        failing = [r for r in cand.results if r.outcome in (Outcome.FAILED, Outcome.ERROR, Outcome.NOT_RUN)]
        if not failing:  # nothing ran (every selected check skipped there): no evidence either way
            return (BisectStep(i, build.label, "skip", f"could not be judged: none of the selected checks ran (log: {log})",
                               date=date, git=git), base, [])
        return BisectStep(i, build.label, "bad", _reasons(failing), date=date, git=git, checks=tuple(failing)), base, []
    unsettled = unsettled_of(cand.results)
    if unsettled:
        return (BisectStep(i, build.label, "skip", _reasons(unsettled), date=date, git=git, checks=tuple(unsettled)),
                base, [r.id for r in unsettled])
    ran = [r for r in cand.results if r.outcome is not Outcome.SKIPPED]
    return BisectStep(i, build.label, "good", f"the {len(ran)} selected check(s) pass", date=date, git=git), base, []


def unsettled_of(results: Sequence[CheckResult]) -> list[CheckResult]:
    """The suspicious results that leave a step unsettled: all but those of an aspect whose judge.py says it warns by
    design (WARNS_BY_DESIGN: op-latency's slower ops are never a failure, so never a reason to look again)."""
    return [r for r in results if r.outcome is Outcome.SUSPICIOUS
            and not getattr(part(r.aspect, "judge"), "WARNS_BY_DESIGN", False)]


def _good_step(good: listing.Build, baseline: Report | None) -> BisectStep:
    """The good build, as compare's baseline in the premise step: it must pass the selected checks itself."""
    date = str(good.date or "")
    if baseline is None:
        return BisectStep(0, good.label, "good", "the baseline of every step", date=date)
    git = str(baseline.environment.get("torch_git") or "")
    failing = [r for r in baseline.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)
               and r.aspect not in AB_ASPECTS]  # a baseline's A/B figures only inform
    if failing:
        return BisectStep(0, good.label, "bad", f"the good build {good.label} fails the selected checks itself "
                          f"({_reasons(failing)}); pick an older good build, or narrow --only", date=date, git=git,
                          checks=tuple(failing))
    return BisectStep(0, good.label, "good", "the baseline of every step: its selected checks pass", date=date, git=git)


def _reasons(results: Sequence[CheckResult]) -> str:
    shown = "; ".join(f"{r.id}: {r.outcome.value}, {r.reason}" for r in results[:3])
    return shown + (f"; and {len(results) - 3} more" if len(results) > 3 else "")


def _read(path: Path) -> list[Report]:
    try:
        return read_reports(path) if path.exists() else []
    except SchemaError:
        return []


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if f"{PROG}: infrastructure error" in ln or f"{PROG}: internal error" in ln]
    return (errors or lines or ["no output"])[-1]


def _installs(todo: Sequence[listing.Build], steps: dict[int, BisectStep]) -> int:
    """Builds installed (or reused from the venv store) for the steps so far: the good one and each judged."""
    versions = {todo[i].label for i in steps if not todo[i].python}
    return len(versions)


def _is_commit(text: str) -> bool:
    return len(text) >= 7 and all(c in "0123456789abcdef" for c in text.lower())


def _finish(s: BisectSettings, record: Bisection, out: Path) -> dict[str, str]:
    from torch_upgrade_check.report import bisect as render

    paths = {"report": str((out / "report.json").resolve()), "junit": str((out / "junit.xml").resolve()),
             "summary": str((out / "summary.md").resolve())}
    return github.publish_text(render.render_summary(record), render.junit_text(record),
                               render.outputs(record, paths), out, environ=os.environ,
                               job_summary=not s.no_job_summary)

