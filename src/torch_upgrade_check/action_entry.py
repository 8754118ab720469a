"""The GitHub Action's last step: action inputs (from env) -> validated -> one CLI command, run, its exit code.

action.yml hands every input to this module through `env:` as INPUT_<NAME> (upper case, `-` -> `_`), so
no input is ever interpolated into shell. Problems are collected and printed one line each, naming the
input and the fix (exit 2), before any torch is installed or checked. The command is then `compare` when a
torch version or a baseline is asked for, else `run` with the torch already installed for `python`.

The CLI gets the real `--fail-on`: it writes report.json, junit.xml, summary.md, the step summary,
annotations and the step's outputs first and only then exits 1, so the step fails last, after
everything was written, and the rule of which failures count lives in one place (the CLI). A bad input
stops here, before the CLI: an `::error` annotation per problem and the outputs `verdict=error`, counts 0
(github.py writes both; this module writes no GitHub file itself). It never imports torch.

`cache-key` (the action's step before it, when input `cache` is true) says whether and under which key the
torch venvs are restored from and saved to GitHub's cache: the outputs `enabled`, `key` and `path`.

This module dispatches; the parts live in action/: the inputs and their problems (inputs.py), the CLI command
they ask for (argv.py), the cache-key and upload steps (steps.py), the bisection after a failure (bisect.py).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence

from torch_upgrade_check import github
from torch_upgrade_check.action.argv import plan
from torch_upgrade_check.action.bisect import bisect_after_failure
from torch_upgrade_check.action.inputs import PROG, TRUE, alias_notes, read_inputs
from torch_upgrade_check.action.steps import cache_plan, upload_plan
from torch_upgrade_check.errors import EXIT_FAILED, EXIT_INFRA, EXIT_USAGE


def main(environ: Mapping[str, str] | None = None, argv: Sequence[str] = ()) -> int:
    environ = os.environ if environ is None else environ
    if list(argv) == ["cache-key"]:
        github.set_outputs(cache_plan(environ), environ=environ)
        return 0
    if list(argv) == ["upload"]:
        github.set_outputs(upload_plan(environ), environ=environ)
        return 0
    for note in alias_notes(environ)[0]:  # here only, not in cache-key: once per run
        print(f"{PROG}: warning: {note}", file=sys.stderr, flush=True)
        github.warning(f"{PROG}: deprecated input", note, environ=environ)
    p = plan(environ)
    if p.problems:
        for problem in p.problems:
            print(f"{PROG}: error: {problem}", file=sys.stderr)
        github.stopped_early(p.problems, environ=environ)
        return EXIT_USAGE
    print(f"{PROG}: in {p.cwd}: {shlex.join([PROG, *p.argv])}", flush=True)
    try:
        rc = subprocess.run([sys.executable, "-m", "torch_upgrade_check", *p.argv], cwd=p.cwd, check=False).returncode
    except OSError as e:
        problem = f"could not start the CLI with {sys.executable}: {e}"
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        github.stopped_early([problem], environ=environ, title="torch-upgrade-check: infrastructure error")
        return EXIT_INFRA
    if rc == 0:
        return 0
    why = {
        EXIT_FAILED: f"thresholds crossed (fail-on: {','.join(p.fail_on) or 'none'}); the summary says which checks",
        EXIT_USAGE: "a usage or configuration error (the line above says which)",
        EXIT_INFRA: "an infrastructure error: torch could not be installed or run; the report says why",
    }.get(rc, f"the CLI ended with exit code {rc}")
    values = read_inputs(environ)
    if rc == EXIT_FAILED and values["bisect"].lower() in TRUE:
        bisect_after_failure(values, p.cwd, environ)
    print(f"{PROG}: failing the step: {why}", file=sys.stderr, flush=True)
    if rc in (EXIT_FAILED, EXIT_USAGE, EXIT_INFRA):
        return rc  # the CLI wrote the outputs and annotations itself
    # killed (a signal, the runner out of memory) before it could say anything: the outputs say error
    github.stopped_early([f"torch-upgrade-check ended with exit code {rc}; the step's log shows how far it got"],
                         environ=environ, title="torch-upgrade-check: infrastructure error")
    return EXIT_INFRA


if __name__ == "__main__":
    sys.exit(main(argv=sys.argv[1:]))
