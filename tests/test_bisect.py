"""`bisect`: listing builds, the search, its report, and end to end over prepared interpreters with real torch.

The end-to-end builds are wrapper interpreters of the test's torch (benchmarks/inject.py): a numeric drift or
a slowdown switched on from a known build on, an A/A sequence in which nothing changes, and a build whose
interpreter has no torch (it cannot be judged, as an install that fails).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import venv
from dataclasses import fields, replace
from pathlib import Path

import cmarkgfm
import lxml.html
import pytest
from cmarkgfm.cmark import Options
from conftest import ROOT, run_cli
from lxml import etree

from torch_upgrade_check import cli
from torch_upgrade_check.analysis import bisect as search
from torch_upgrade_check.commands import argv as command_line
from torch_upgrade_check.commands import settings
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import Bisection, BisectStep
from torch_upgrade_check.orchestrate import builds
from torch_upgrade_check.report import bisect as render
from torch_upgrade_check.schema import read_bisection, write_bisection

sys.path.insert(0, str(ROOT / "benchmarks"))
from inject import injected_python

XSD = etree.XMLSchema(etree.parse(str(ROOT / "tests" / "report" / "junit-10.xsd")))


# --- listing -------------------------------------------------------------------------------------------------

def test_versions_sort_as_pep_440_orders_them() -> None:
    given = ["2.14.1", "2.14.0", "2.14.0rc2", "2.14.0.dev20261115", "2.14.0rc1", "2.14.0.dev20261102",
             "2.13.1", "2.14.0.post1", "2.14.0a1"]
    assert sorted(given, key=builds.sort_key) == [
        "2.13.1", "2.14.0.dev20261102", "2.14.0.dev20261115", "2.14.0a1", "2.14.0rc1", "2.14.0rc2", "2.14.0",
        "2.14.0.post1", "2.14.1"]


def _index(folder: Path, files: list[str]) -> str:
    (folder / "torch").mkdir(parents=True)
    links = "".join(f'<a href="{name}#sha256=00">{name}</a><br>\n' for name in files)
    (folder / "torch" / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return folder.as_uri()


def test_builds_are_listed_from_a_simple_index_for_this_python_and_platform(tmp_path: Path) -> None:
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    url = _index(tmp_path / "simple", [
        f"torch-2.14.0.dev20261115%2Bcpu-{py}-{py}-manylinux_2_28_x86_64.whl",
        f"torch-2.14.0.dev20261102%2Bcpu-{py}-{py}-manylinux_2_28_x86_64.whl",
        f"torch-2.14.0.dev20261108%2Bcpu-{py}-{py}-manylinux_2_28_aarch64.whl",  # another machine's
        "torch-2.14.0.dev20261109%2Bcpu-cp39-cp39-manylinux_2_28_x86_64.whl",  # another Python's
        f"torch-2.14.0.dev20261110%2Bcpu-{py}-{py}-manylinux_2_28_x86_64.whl",
        "torchvision-0.29.0-py3-none-any.whl",
    ])
    versions = builds.list_versions(url, python_tag=py, platform_tags=["manylinux_*_x86_64"])
    assert versions == ["2.14.0.dev20261102+cpu", "2.14.0.dev20261110+cpu", "2.14.0.dev20261115+cpu"]
    assert builds.between(versions, "2.14.0.dev20261102", "2.14.0.dev20261110") == versions[:2]
    assert str(builds.build_date("2.14.0.dev20261110")) == "2026-11-10"


def test_bad_ranges_say_what_to_pick() -> None:
    versions = ["2.14.0.dev20261102", "2.14.0.dev20261110", "2.14.0.dev20261115"]
    with pytest.raises(UsageError, match="must come before"):
        builds.between(versions, "2.14.0.dev20261115", "2.14.0.dev20261102")
    with pytest.raises(UsageError, match="not among the 3 builds listed"):
        builds.between(versions, "2.14.0.dev20261101", "2.14.0.dev20261115")


def test_a_builds_file_takes_versions_and_prepared_interpreters(tmp_path: Path) -> None:
    f = tmp_path / "builds.txt"
    f.write_text("# oldest first\n2.14.0.dev20261102\nnew=/opt/envs/b/bin/python\n\n2.14.0.dev20261115  # bad\n")
    assert builds.read_builds(f) == [builds.Build("2.14.0.dev20261102"), builds.Build("new", "/opt/envs/b/bin/python"),
                                     builds.Build("2.14.0.dev20261115")]
    f.write_text("2.14.0\nnot a build\n")
    with pytest.raises(UsageError, match=r"builds.txt:2: 'not a build' is neither a torch version"):
        builds.read_builds(f)
    f.write_text("2.14.0\n")
    with pytest.raises(UsageError, match="needs a good and a bad one"):
        builds.read_builds(f)


# --- the search ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("count", [2, 3, 4, 7, 8, 9, 31, 64])
def test_the_search_finds_every_first_bad_build_within_its_step_bound(count: int) -> None:
    for first_bad in range(1, count):
        verdicts = {0: "good", count - 1: "bad"}
        while (i := search.next_build(verdicts, count)) is not None:
            verdicts[i] = "bad" if i >= first_bad else "good"
        found = search.found(verdicts, count)
        assert (found.last_good, found.first_bad, found.exact) == (first_bad - 1, first_bad, True)
        assert len(verdicts) <= search.max_steps(count)


def test_a_build_that_cannot_be_judged_widens_the_range_and_is_named() -> None:
    # builds 0..8, the regression from 5 on, and build 4 cannot be installed
    verdicts = {0: "good", 8: "bad"}
    while (i := search.next_build(verdicts, 9)) is not None:
        verdicts[i] = "skip" if i == 4 else "bad" if i >= 5 else "good"
    found = search.found(verdicts, 9)
    assert (found.last_good, found.first_bad, found.skipped_between, found.exact) == (3, 5, (4,), False)


# --- the report ----------------------------------------------------------------------------------------------

def _bisection(outcome: str = "found") -> Bisection:
    steps = (BisectStep(0, "2.14.0.dev20261102", "good", "the baseline of every step", "2026-11-02", "a" * 40),
             BisectStep(1, "2.14.0.dev20261105", "skip", "could not be judged: no wheel", "2026-11-05"),
             BisectStep(2, "2.14.0.dev20261108", "good", "the 1 selected check(s) pass", "2026-11-08", "b" * 40, 12.0),
             BisectStep(3, "2.14.0.dev20261110", "bad", "mlp[float32]/latency: failed, 1.31× slower | <b>",
                        "2026-11-10", "c" * 40, 20.5),
             BisectStep(4, "2.14.0.dev20261115", "bad", "mlp[float32]/latency: failed, 1.30× slower", "2026-11-15",
                        "d" * 40, 19.0))
    return Bisection("1.0.0", ["torch-upgrade-check", "bisect"], "2026-12-01T00:00:00Z", "cpu",
                     ["mlp[float32]/latency"], [s.build for s in steps], outcome=outcome, steps=steps,
                     last_good="2.14.0.dev20261108", first_bad="2.14.0.dev20261110",
                     compare_url=f"https://github.com/pytorch/pytorch/compare/{'b' * 40}...{'c' * 40}", installs=5,
                     reason="first bad build: 2.14.0.dev20261110 (last good: 2.14.0.dev20261108)")


def test_the_summary_names_the_first_bad_build_its_date_and_the_commits(tmp_path: Path) -> None:
    text = render.render_summary(_bisection())
    assert "first bad build found" in text.splitlines()[0]
    assert "**Last good:** `2.14.0.dev20261108` (2026-11-08) · **first bad:** `2.14.0.dev20261110` (2026-11-10)" in text
    # as GitHub renders it (raw HTML allowed: the escaping alone must hold)
    html = lxml.html.fromstring("<div>" + cmarkgfm.markdown_to_html_with_extensions(
        text, options=Options.CMARK_OPT_UNSAFE, extensions=["table", "autolink"]) + "</div>")
    assert f"compare/{'b' * 40}...{'c' * 40}" in text and "1.31× slower" in html.text_content()
    rows = [[c.text_content() for c in tr.xpath("./td")] for tr in html.iter("tr")]
    assert ["3", "2.14.0.dev20261110 (2026-11-10)", "❌ bad", "mlp[float32]/latency: failed, 1.31× slower | <b>",
            "20 s"] in rows, rows
    assert not html.xpath("//b")  # a reason's markup shows as text
    path = tmp_path / "report.json"
    write_bisection(_bisection(), path)
    assert read_bisection(path) == _bisection()
    assert json.loads(path.read_text())["kind"] == "torch-upgrade-check/bisect"


@pytest.mark.parametrize("outcome", ["found", "range", "not-reproduced", "error"])
def test_the_junit_validates_and_agrees_with_the_outcome(outcome: str) -> None:
    text = render.junit_text(_bisection(outcome))
    root = etree.fromstring(text.encode())
    XSD.assertValid(root)
    assert root.get("failures") == "2"  # the two bad builds
    odd = _bisection(outcome)
    odd = replace(odd, steps=(*odd.steps[:4], replace(odd.steps[4], reason="worker said \x1b[31mboom\x00")))
    XSD.assertValid(etree.fromstring(render.junit_text(odd).encode()))  # a log line's control bytes stay valid XML
    assert root.get("errors") == ("0" if outcome in ("found", "range") else "1")
    assert len(root.findall(".//skipped")) == 1
    outputs = render.outputs(_bisection(outcome), {"report": "r.json"})
    assert outputs["verdict"] == ("passed" if outcome in ("found", "range") else "error")
    assert outputs["first-bad"] == "2.14.0.dev20261110" and outputs["report"] == "r.json"


# --- the command's input -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "said"), [
    (["--good", "2.14.0", "--bad", "2.14.1"], "bisect needs --only GLOB"),
    (["--only", "mlp"], "bisect needs --good VERSION and --bad VERSION"),
    (["--only", "mlp", "--good", "2.14.0", "--bad", "2.14.1", "--builds", "b.txt"], "either --builds FILE or"),
    (["--only", "mlp", "--good", "yesterday", "--bad", "2.14.1"], "--good must be a torch version"),
    (["--only", "mlp", "--builds", "no-such-file.txt"], "--builds no-such-file.txt: cannot read it"),
    (["--only", "mlp", "--good", "2.14.0", "--bad", "2.14.1", "--index-url", "file:///no/such/index"],
     "cannot list the builds on file:///no/such/index/torch/"),
    (["--only", "mlp", "--builds", "b.txt", "--list"], "--list is not for bisect"),
    (["--only", "mlp", "--builds", "b.txt", "--fail-on", "speed"], "--fail-on must be"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], said: str) -> None:
    (tmp_path / "b.txt").write_text("2.14.0\n2.14.1\n")
    proc = run_cli("bisect", *argv, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


# --- end to end, real torch ------------------------------------------------------------------------------------

def _builds_file(tmp_path: Path, torch_python: str, count: int, first_bad: int | None, **fault: float) -> Path:
    """`count` wrapper interpreters, the fault switched on from `first_bad` on (never when None)."""
    lines = []
    for i in range(count):
        on = first_bad is not None and i >= first_bad
        python = injected_python(torch_python, tmp_path / f"build{i}", **(fault if on else {}))
        lines.append(f"2.14.0.dev202611{10 + i:02d}={python}")
    path = tmp_path / "builds.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _bisect(tmp_path: Path, builds_file: Path, *only: str, env: dict[str, str] | None = None) -> tuple[object, dict]:
    out = tmp_path / "out"
    args = ["bisect", "--builds", str(builds_file), "--device", "cpu", "--threads", "1", "--out", str(out)]
    args += [] if env else ["--no-job-summary"]
    for pattern in only:
        args += ["--only", pattern]
    proc = run_cli(*args, env=env)
    doc = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return proc, doc


def _subparser(name: str) -> argparse.ArgumentParser:
    (sub,) = (a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_a_slower_op_never_leaves_a_step_unsettled_another_suspicious_check_does() -> None:
    """op-latency warns by design (its judge.py's WARNS_BY_DESIGN): its suspicious result is no reason to look again;
    a suspicious latency, or an aspect this version does not know (another version's report), is."""
    from torch_upgrade_check.commands.bisect import unsettled_of
    from torch_upgrade_check.model import CheckResult, Outcome

    def result(aspect: str, outcome: Outcome = Outcome.SUSPICIOUS) -> CheckResult:
        return CheckResult("mlp", aspect, "cpu", "float32", outcome, reason="slower")

    slower_op, latency, unknown = result("op-latency"), result("latency"), result("no-such-aspect")
    assert unsettled_of([slower_op, latency, result("numerics", Outcome.PASSED), unknown]) == [latency, unknown]
    assert unsettled_of([slower_op]) == []


def test_every_compare_flag_is_forwarded_by_bisect_or_named_as_not() -> None:
    compare = {a.dest for a in _subparser("compare")._actions}
    forwarded = [*command_line.FORWARD_ONE, *command_line.FORWARD_MANY, *command_line.FORWARD_FLAGS]
    assert len(forwarded) == len(set(forwarded))
    assert compare - set(forwarded) == set(command_line.NOT_FORWARDED), "a compare flag bisect neither forwards nor names"
    assert not set(forwarded) & set(command_line.NOT_FORWARDED)
    assert set(forwarded) <= {a.dest for a in _subparser("bisect")._actions}
    assert set(forwarded) <= {f.name for f in fields(settings.BisectSettings)}


def test_bisect_hands_each_forwarded_flag_to_compare_as_given(tmp_path: Path) -> None:
    """Every forwarded flag, set to something other than its default, reaches each step's compare unchanged."""
    argv = ["bisect", "--good", "2.13.0", "--bad", "2.14.1", "--only", "mlp*"]
    for action in _subparser("bisect")._actions:
        flag = action.option_strings[-1] if action.option_strings else ""
        if action.dest in command_line.FORWARD_FLAGS:
            argv.append(flag)
        elif action.dest in command_line.FORWARD_ONE:
            argv += [flag, action.choices[-1] if action.choices else f"7-{action.dest}"]
        elif action.dest in command_line.FORWARD_MANY:
            argv += [flag, f"a-{action.dest}", flag, f"b-{action.dest}"]
    given = cli.build_parser().parse_args(argv)
    step = command_line.bisect_step(settings.build(given, argv), builds.Build("2.13.0", ""), builds.Build("2.14.1", ""),
                                    tmp_path, "", ["x"])
    got = cli.build_parser().parse_args(step)
    for name in (*command_line.FORWARD_ONE, *command_line.FORWARD_MANY, *command_line.FORWARD_FLAGS):
        assert getattr(got, name) == getattr(given, name) != _subparser("compare").get_default(name), name


def test_a_numeric_drift_is_found_at_the_build_that_introduced_it(tmp_path: Path, torch_python: str) -> None:
    builds_file = _builds_file(tmp_path, torch_python, 6, 4, drift=1e-3)
    github = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "gh-output"),
              "GITHUB_STEP_SUMMARY": str(tmp_path / "gh-summary")}
    proc, doc = _bisect(tmp_path, builds_file, "mlp[float32]/cross-version", env=github)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    # the steps' compares write nothing of GitHub's: the step's summary and outputs are bisect's alone
    output = (tmp_path / "gh-output").read_text()
    assert output.count("verdict<<") == 1 and "2.14.0.dev20261114" in output and "\npassed\n" in output
    assert (tmp_path / "gh-summary").read_text().startswith("## torch-upgrade-check bisect: first bad build found")
    assert "::error" not in proc.stdout
    assert (doc["outcome"], doc["last_good"], doc["first_bad"]) == ("found", "2.14.0.dev20261113", "2.14.0.dev20261114")
    assert len(doc["steps"]) <= search.max_steps(6)
    bad = next(s for s in doc["steps"] if s["build"] == doc["first_bad"])
    assert "cross-version" in bad["reason"] and bad["date"] == "2026-11-14"
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "**first bad:** `2.14.0.dev20261114` (2026-11-14)" in summary
    XSD.assertValid(etree.parse(str(tmp_path / "out" / "junit.xml")))
    assert "first bad build: 2.14.0.dev20261114" in proc.stdout


@pytest.mark.serial  # its verdict is a timing: run alone, after the parallel phase
@pytest.mark.slow
def test_a_slowdown_is_found_at_the_build_that_introduced_it(tmp_path: Path, torch_python: str) -> None:
    builds_file = _builds_file(tmp_path, torch_python, 5, 2, slowdown=1.0)
    proc, doc = _bisect(tmp_path, builds_file, "mlp[float32]/latency")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert (doc["outcome"], doc["first_bad"]) == ("found", "2.14.0.dev20261112"), doc["steps"]
    bad = next(s for s in doc["steps"] if s["build"] == doc["first_bad"])
    assert "regression" in bad["reason"] and "slower" in bad["reason"], bad


@pytest.mark.fast  # in the fast tier: one of the few e2e tests that together run every module
def test_noise_finds_nothing_and_says_so(tmp_path: Path, torch_python: str) -> None:
    builds_file = _builds_file(tmp_path, torch_python, 4, None)
    proc, doc = _bisect(tmp_path, builds_file, "mlp[float32]/cross-version")
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr
    assert "the failure does not reproduce on 2.14.0.dev20261113: nothing to bisect" in proc.stderr
    assert doc["outcome"] == "not-reproduced" and len(doc["steps"]) == 2  # the premise alone: good and bad


def test_a_build_that_cannot_run_is_skipped_and_named(tmp_path: Path, torch_python: str) -> None:
    builds_file = _builds_file(tmp_path, torch_python, 5, 3, drift=1e-3)
    venv.create(tmp_path / "bare", with_pip=False)  # no torch: as a build whose install failed
    lines = builds_file.read_text().splitlines()
    lines[2] = f"2.14.0.dev20261112={tmp_path / 'bare' / 'bin' / 'python'}"
    builds_file.write_text("\n".join(lines) + "\n")
    proc, doc = _bisect(tmp_path, builds_file, "mlp[float32]/cross-version")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    skipped = next(s for s in doc["steps"] if s["build"] == "2.14.0.dev20261112")
    assert skipped["verdict"] == "skip" and "torch" in skipped["reason"], skipped
    assert doc["first_bad"] == "2.14.0.dev20261113"
    assert doc["outcome"] == "range" and doc["skipped_between"] == ["2.14.0.dev20261112"]
    assert doc["last_good"] == "2.14.0.dev20261111"


def test_nightlies_are_listed_installed_and_judged_from_a_local_index(tmp_path: Path, torch_python: str) -> None:
    """--good/--bad over an index: the builds are listed from it, each one judged is installed into the venv
    store (verified as the version asked for), one whose install fails is skipped and named, and the first
    bad build is found with its commit; a second bisect reuses every venv."""
    from harness.nightlies import git_version, nightly_index

    versions = [f"2.14.0.dev202611{10 + i:02d}" for i in range(7)]
    url = nightly_index(torch_python, tmp_path / "index", versions, fault_from=5, drift=1e-3, broken={versions[3]})
    out = tmp_path / "out"
    args = ["bisect", "--good", versions[0], "--bad", versions[-1], "--only", "mlp[float32]/cross-version",
            "--index-url", url, "--installer", "pip", "--venv-dir", str(tmp_path / "venvs"), "--device", "cpu",
            "--threads", "1", "--out", str(out), "--no-job-summary"]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    doc = json.loads((out / "report.json").read_text())
    assert (doc["outcome"], doc["last_good"], doc["first_bad"]) == ("found", versions[4], versions[5]), doc["steps"]
    steps = {s["build"]: s for s in doc["steps"]}
    assert steps[versions[3]]["verdict"] == "skip" and "install" in steps[versions[3]]["reason"], steps[versions[3]]
    assert git_version(versions[5]) in doc["compare_url"] and git_version(versions[4]) in doc["compare_url"]
    skipped = [s for s in doc["steps"] if s["verdict"] == "skip"]
    assert len(doc["steps"]) - len(skipped) <= search.max_steps(len(versions)) and len(doc["steps"]) < len(versions)
    assert doc["installs"] == len({s["build"] for s in doc["steps"]})  # each build tried once, through the store
    # every judged build was installed into the store once; run again, nothing is installed
    again = run_cli(*args[:-3], "--out", str(tmp_path / "again"), "--no-job-summary")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    logs = [log.read_text() for log in sorted((tmp_path / "again" / "steps").glob("*/compare.log"))]
    assert logs and not any("installed in" in log for log in logs), logs
    assert sum("reused from" in log for log in logs) == len(logs) - 1  # the broken build is tried again, never stored


def test_a_release_is_the_good_build_of_a_nightly_range(tmp_path: Path, torch_python: str) -> None:
    """`--good 2.13.0 --bad <nightly>`: the release is not on the nightly index; it is installed from its own
    channel (here the installer's configured one, `--torch-backend pypi`) and every nightly after it is a build."""
    from harness.nightlies import nightly_index

    release = subprocess.run([torch_python, "-c", "import torch; print(torch.__version__.split('+')[0])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    versions = [f"2.14.0.dev202611{10 + i:02d}" for i in range(4)]
    url = nightly_index(torch_python, tmp_path / "index", versions, fault_from=2, drift=1e-3)
    out = tmp_path / "out"
    proc = run_cli("bisect", "--good", release, "--bad", versions[-1], "--only", "mlp[float32]/cross-version",
                   "--index-url", url, "--torch-backend", "pypi", "--installer", "pip", "--venv-dir",
                   str(tmp_path / "venvs"), "--device", "cpu", "--threads", "1", "--out", str(out), "--no-job-summary")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["builds"] == [release, *versions]
    assert (doc["outcome"], doc["last_good"], doc["first_bad"]) == ("found", versions[1], versions[2]), doc["steps"]
    assert f"good: torch {release}" in proc.stdout and "installed in" in proc.stdout, proc.stdout[-2000:]
