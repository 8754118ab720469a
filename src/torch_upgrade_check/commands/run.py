"""The `run` command: the suite with one torch on one device, one report."""

from __future__ import annotations

import shlex
import shutil
import time
from dataclasses import replace

from torch_upgrade_check import __version__
from torch_upgrade_check.aspects import APART_ASPECTS
from torch_upgrade_check.aspects.api import host as apiscan
from torch_upgrade_check.commands import argv
from torch_upgrade_check.commands.common import PROG, finish, fleet_memory, fleet_result, infra, say, with_device_limits
from torch_upgrade_check.commands.settings import RunSettings
from torch_upgrade_check.errors import EXIT_PASSED
from torch_upgrade_check.hostchecks import pytest_passthrough
from torch_upgrade_check.model import ASPECTS, CheckSpec
from torch_upgrade_check.orchestrate import device_choice, session
from torch_upgrade_check.orchestrate.workers import InfrastructureError
from torch_upgrade_check.report import costs
from torch_upgrade_check.schema import write_reports


def execute(s: RunSettings) -> int:
    settings, output = s.session, s.output
    roots = apiscan.scan_roots(s, settings.only)  # a --scan path that does not exist: exit 2 before anything runs
    out = settings.out
    report = session.new_report(settings)
    try:
        python = session.resolve_python(s.python)
        shutil.rmtree(out / "logs", ignore_errors=True)
        probe = session.probe(python, settings)
    except InfrastructureError as e:
        return infra(output, [report], str(e))
    choice = device_choice.choose(s.device, {"candidate": probe.probes}, device_choice.host_accelerator(),
                                  label=probe.environment.get("torch_version", ""))
    device = choice.device
    settings = with_device_limits(settings, s.cfg, device)
    specs = session.plan(settings, device, aspects=[a for a in ASPECTS if a not in APART_ASPECTS])
    env = {**session.environment(probe), "device_choice": choice.record(s.device)}
    report = replace(report, device=device, label=env.get("torch_version", "?"), environment=env)
    head = argv.run_head(python)
    lost = choice.result(shlex.join([PROG, *head, "--device", choice.expected]))
    served = fleet_result(s.served, env, device, shlex.join([PROG, *head, *argv.fleet_flags(s)]))
    report = replace(report, results=tuple(r for r in (lost, served) if r is not None))
    api_id = f"{apiscan.WORKLOAD}[-]/{apiscan.ASPECT}"
    if not roots:
        session.require_checks(specs, settings, report.results)
    if s.list:
        print("\n".join(costs.listing([*((c.id, c.aspect) for c in specs), *([(api_id, apiscan.ASPECT)] if roots else [])])))
        return EXIT_PASSED
    say(f"{PROG} {__version__}: torch {report.label} on {device} ({env.get('cpu', '')}, "
        f"{env.get('threads')} threads), {len(specs)} checks -> {out}/")
    for r in report.results:
        say(f"{PROG}: {r.outcome.value.upper()} {r.id}: {r.reason}")
    started = time.monotonic()
    progress = session.Progress(len(specs), say)
    final = session.execute(
        python, specs, settings, report, probes=probe.probes,
        repro=lambda c: argv.repro_command(s, head, device, c),
        on_update=lambda r: write_reports([r], out / "report.json"),
        progress=progress,
    )
    final = pytest_passthrough.after_checks(final, python, settings, log_prefix="worker", progress=progress,
                                            on_update=lambda r: write_reports([r], out / "report.json"))
    if final.infra_error:
        return infra(output, [final], final.infra_error)
    if roots:  # the names this torch lacks (no baseline: suspicious, never failed)
        api = apiscan.check({"candidate": python}, roots, device=device, timeout_s=max(settings.timeout_s, apiscan.TIMEOUT_S),
                            repro=argv.repro_command(s, head, device,
                                                     CheckSpec(apiscan.WORKLOAD, apiscan.ASPECT, device, apiscan.DTYPE)),
                            say=say)
        say(f"api {api['candidate'].outcome.value}: {api['candidate'].reason[:300]}")
        final = replace(final, results=(*final.results, api["candidate"]))
    final = fleet_memory(s.served, final,
                         lambda only: shlex.join([PROG, *head, "--device", device, *argv.fleet_flags(s, only)]))
    final = replace(final, finished=session.now(), complete=True)
    write_reports([final], out / "report.json")
    return finish(output, [final], out / "report.json", time.monotonic() - started)
