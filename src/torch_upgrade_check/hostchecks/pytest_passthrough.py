"""Run the user's pytest selection with the interpreter under test and turn its JUnit into CheckResults (no torch).

Check ids: each test case becomes `CheckResult(workload=<pytest node id>, aspect="pytest", dtype="-")`,
so its id is `tests/test_models.py::test_forward[-]/pytest`. The aspect is the kind of check and the
workload is what was checked, as for every other result: the summary's per-aspect tables then show one
"pytest" table with a row per test, `--only pytest` selects them all, and the same test has the same id
under every torch version (compare matches results by id). Problems with the pytest run itself (timeout,
pytest missing, no JUnit file, nothing collected) become one error result with the id `pytest[-]/pytest`;
no node id can clash with it, since node ids name a file. Once tests ran, the warnings they raised are one
more result, `pytest[-]/warnings` (recorded by the plugin worker.pytest_warnings inside the pytest run), which
compare judges as it judges a workload's warnings.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from torch_upgrade_check.aspects.warnings.judge import warnings_details, warnings_reason
from torch_upgrade_check.model import CheckResult, Outcome, Report
from torch_upgrade_check.orchestrate.session import Progress, Settings, pytest_selected
from torch_upgrade_check.orchestrate.workers import package_path
from torch_upgrade_check.worker.pytest_warnings import ENV as WARNINGS_ENV
from torch_upgrade_check.worker.warned import tally

ASPECT = "pytest"
DTYPE = "-"
SESSION = "pytest"  # the workload name of the one result that speaks for the whole pytest run
JUNIT_NAME = "pytest-junit.xml"
LOG_NAME = "pytest.log"
WARNINGS_NAME = "pytest-warnings.jsonl"
WARNINGS_PLUGIN = "torch_upgrade_check.worker.pytest_warnings"
TAIL_LINES = 40
DETAILS_LIMIT = 20_000
REASON_LIMIT = 300
EXIT_MEANINGS = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}


def pytest_command(python: str, args: Sequence[str], junit: Path) -> list[str]:
    """Our options come after the user's so that they win (the last --junitxml counts).

    xunit1 puts `file` on each <testcase>, which the node id needs; no:cacheprovider keeps
    .pytest_cache out of the user's checkout.
    """
    return [python, "-m", "pytest", *args, f"--junitxml={junit}", "-o", "junit_family=xunit1", "-p", "no:cacheprovider",
            "-p", WARNINGS_PLUGIN]


def after_checks(report: Report, python: str, settings: Settings, *, log_prefix: str, progress: Progress,
                 on_update: Callable[[Report], None]) -> Report:
    """`report` (one side's worker checks, run by session.execute) with the config's pytest selection run after them
    with `python`, a result for each test added; unchanged where the workers failed or no pytest run is selected."""
    if report.infra_error or not pytest_selected(settings):
        return report
    tests = run_pytest(python, settings.pytest_args or (), cwd=settings.config_root or Path.cwd(),
                       out_dir=settings.out / "logs" / f"pytest-{log_prefix}", timeout_s=settings.timeout_s,
                       python_path=settings.python_path, device=report.device)
    progress.total += len(tests)
    results = {r.id: r for r in report.results}
    for r in tests:
        results[r.id] = r
        progress(r, r.duration_s)
    report = replace(report, results=tuple(results.values()))
    on_update(report)
    return report


def run_pytest(python: str, args: Sequence[str], *, cwd: Path, out_dir: Path, timeout_s: float,
               python_path: Sequence[str] = (), device: str = "cpu") -> list[CheckResult]:
    """Run `python -m pytest ARGS` in `cwd` and return one CheckResult per test case.

    `python_path` folders are prepended to PYTHONPATH; TORCH_UPGRADE_CHECK_DEVICE tells the tests which
    device is under test. The JUnit file and the combined output are kept in `out_dir`
    (pytest-junit.xml, pytest.log). Never raises for what pytest does: a timeout, a missing pytest or
    interpreter, an unreadable JUnit file or an empty selection is one `error` result with the output's tail.
    """
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    junit, log, warned = out_dir / JUNIT_NAME, out_dir / LOG_NAME, out_dir / WARNINGS_NAME
    junit.unlink(missing_ok=True)
    warned.unlink(missing_ok=True)
    cmd = pytest_command(python, args, junit)
    repro = f"cd {shlex.quote(str(cwd))} && {shlex.join([python, '-m', 'pytest', *args])}"
    env = {**os.environ, "TORCH_UPGRADE_CHECK_DEVICE": device, WARNINGS_ENV: str(warned)}
    # the plugin's package comes last: the user's own modules win any name they share
    env["PYTHONPATH"] = os.pathsep.join([*python_path, *filter(None, [os.environ.get("PYTHONPATH")]), str(package_path())])
    started = time.monotonic()

    def session_error(reason: str) -> list[CheckResult]:
        return [CheckResult(workload=SESSION, aspect=ASPECT, device=device, dtype=DTYPE, outcome=Outcome.ERROR,
                            reason=reason, details=_tail(log), duration_s=round(time.monotonic() - started, 3),
                            repro=repro, metrics={"command": shlex.join(cmd)})]

    if not Path(cwd).is_dir():
        return session_error(f"cannot run pytest in {cwd}: no such folder")
    try:
        code = _run(cmd, cwd=cwd, env=env, log=log, timeout_s=timeout_s)
    except OSError as e:  # the interpreter is missing or not executable
        return session_error(f"cannot start {python}: {e.strerror or e}; pytest runs with the Python whose torch is tested")
    if code is None:
        return session_error(f"pytest did not finish within {timeout_s:g}s and was stopped; no test results were kept "
                             f"(raise the timeout or narrow pytest.args)")
    output = log.read_text(errors="replace")
    said = _error_line(output)
    if not junit.exists():
        if "No module named pytest" in output:
            return session_error(f"pytest is not installed in {python}; install it there (pip install pytest) "
                                 f"or remove the pytest section from the config")
        return session_error(f"pytest wrote no JUnit file ({_exit(code)}){said}")
    try:
        results = parse_junit(junit, device=device, python=python, cwd=cwd)
    except Exception as e:  # any parse failure is reported, never raised
        return session_error(f"pytest's JUnit file {junit} could not be read: {' '.join(str(e).split())}")
    if not results:
        return session_error(f"pytest ran no test with args {shlex.join(args) or '(none)'} ({_exit(code)})"
                             f"{said or '; check the paths and -k/-m expressions'}")
    if code not in (0, 1) and not any(r.outcome in (Outcome.FAILED, Outcome.ERROR) for r in results):
        results += session_error(f"pytest ended with {_exit(code)}{said}")
    return [*results, warnings_result(warned, device=device, repro=repro)]


def warnings_result(path: Path, *, device: str, repro: str) -> CheckResult:
    """`pytest[-]/warnings`: the distinct warnings the tests raised, most frequent first, with the tests that
    raised each (up to 3) in place of a workload's aspects."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []
    except OSError:
        lines = []
    raised = []
    for line in lines:
        try:
            w = json.loads(line)
        except ValueError:
            continue
        raised.append((str(w.get("category")), str(w.get("message")), str(w.get("module")), str(w.get("test"))))
    listed = tally(raised, most=3)
    return CheckResult(workload=SESSION, aspect="warnings", device=device, dtype=DTYPE, outcome=Outcome.PASSED,
                       reason=warnings_reason(listed), metrics={"warnings": listed}, details=warnings_details(listed),
                       repro=repro)


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path, timeout_s: float) -> int | None:
    """The exit code, or None after a timeout (then the whole process group is killed: xdist workers too)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            return None


def _exit(code: int) -> str:
    return f"exit code {code}, {EXIT_MEANINGS[code]}" if code in EXIT_MEANINGS else f"exit code {code}"


def _error_line(output: str) -> str:
    """'; <the last line saying error:>' from pytest's output (usage errors say what was wrong there)."""
    lines = [ln.strip() for ln in output.splitlines() if "error:" in ln.lower()]
    return f"; {lines[-1][:REASON_LIMIT]}" if lines else ""


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def parse_junit(path: Path, *, device: str, python: str = "python", cwd: Path | None = None) -> list[CheckResult]:
    """One CheckResult per <testcase> of a pytest JUnit file (error beats failure beats skipped)."""
    from junitparser import Attr, JUnitXml, TestCase, TestSuite  # here: the CLI runs where junitparser is not

    class _Case(TestCase):
        """A <testcase> with the `file` attribute pytest's xunit1 family writes."""

        file = Attr()

    xml = JUnitXml.fromfile(str(path))
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)
    results = []
    for suite in suites:
        for case in suite:
            nodeid = node_id(case.classname or "", case.name or "", _Case.fromelem(case).file)
            outcome, message, text = _outcome(case.result)
            reason = _reason(outcome, message, text)
            repro = shlex.join([python, "-m", "pytest", nodeid])
            if cwd is not None:
                repro = f"cd {shlex.quote(str(cwd))} && {repro}"
            results.append(CheckResult(workload=nodeid, aspect=ASPECT, device=device, dtype=DTYPE, outcome=outcome,
                                       reason=reason, details=text[-DETAILS_LIMIT:],
                                       duration_s=round(float(case.time or 0.0), 6), repro=repro))
    return results


def _outcome(entries: list) -> tuple[Outcome, str, str]:
    from junitparser import Error, Failure, Skipped

    for kind, outcome in ((Error, Outcome.ERROR), (Failure, Outcome.FAILED), (Skipped, Outcome.SKIPPED)):
        found = [e for e in entries if isinstance(e, kind)]
        if found:
            message = found[0].message or ""
            if found[0].type == "pytest.xfail":
                message = f"expected to fail (xfail): {message}"
            return outcome, message, "\n\n".join(e.text or "" for e in found).strip()
    return Outcome.PASSED, "", ""


def _reason(outcome: Outcome, message: str, text: str) -> str:
    if outcome is Outcome.PASSED:
        return "passed"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    reason = " ".join(message.split())
    if lines and reason in ("", "collection failure"):
        reason = f"{reason}: {lines[-1]}" if reason else lines[-1]  # the exception line says more than the label
    reason = reason or outcome.value
    return reason if len(reason) <= REASON_LIMIT else reason[: REASON_LIMIT - 1] + "…"


def node_id(classname: str, name: str, file: str | None) -> str:
    """pytest's node id back from JUnit: `tests/test_x.py::TestA::test_b[1]`.

    pytest writes classname = the node id's path with '/' -> '.' and '.py' dropped, then its classes,
    joined by dots. With xunit1's `file` attribute the path part is known exactly; without it (xunit2)
    every dotted part before a capitalised one is taken as the path, which is right for test modules.
    """
    if not classname:  # a collection error: the name is the module's dotted path
        return file.replace("\\", "/") if file else name.replace(".", "/") + ".py"
    if file:
        dotted = file.replace("\\", "/").removesuffix(".py").replace("/", ".")
        classes = classname[len(dotted):].strip(".") if classname.startswith(dotted) else ""
        path = file.replace("\\", "/")
    else:
        parts = classname.split(".")
        cut = next((i for i, p in enumerate(parts) if p[:1].isupper()), len(parts))
        path, classes = "/".join(parts[:cut]) + ".py", ".".join(parts[cut:])
    return "::".join([path, *filter(None, classes.split(".")), name])
