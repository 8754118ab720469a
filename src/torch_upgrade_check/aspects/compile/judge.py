"""The compile family's typed metrics and rule (pure): torch.compile's outputs against eager's, as the workload
compiles (compile as its `compile:` options say, compile-mode in the mode teams ship for speed).

- A model that does not compile at all (`compile_error`) fails with torch's first line and the call that raised.
- Outputs and training-step gradients by closeness's compile rule (eager in the same dtype the reference); with the
  factory's dynamic_inputs each other size's outputs too (tensors named `size [48, 64]:output`), and a size whose
  compiled run raised fails, named.
- torch.compile compiling no graph fails (eager compared with eager); so does fullgraph=True failing where the
  workload's `compile:` sets `fullgraph: true` (elsewhere it is said: the model was judged with its breaks).
- In compare, the candidate's compiled outputs and gradients against the baseline's compiled ones and the baseline's
  fp64 golden (`vs_baseline`, closeness's cross-version rule): a change that moves eager and compiled alike passes
  compile against eager in its own version, and fails here.
- In compare, graph breaks, recompiles and graphs new since the baseline (`judge_in_compare`, across the two
  reports), recompiles per size among them: each turns compiled code back into slow eager code.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.analysis.closeness import plural_of as plural
from torch_upgrade_check.aspects._metrics import Closeness, Judged
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome, Report


@dataclass(frozen=True)
class Metrics(Closeness):
    """A compile check's metrics (worker: aspects.compile.run): how it was compiled, what Dynamo compiled and broke,
    the tensors against eager's (closeness reads them), and in compare against the baseline's compiled outputs."""

    compile_options: Mapping[str, Any] | None = None
    compile_env: Mapping[str, str] | None = None
    compile_error: str | None = None
    compile_time_s: float | None = None
    fullgraph: bool | None = None
    fullgraph_error: str | None = None
    training_step: bool | None = None
    training_step_error: str | None = None
    graphs_compiled: int | None = None
    graph_breaks: int | None = None
    graph_break_reasons: Sequence[str] | None = None
    dynamo_fallbacks: Sequence[str] | None = None
    dynamic_sizes: Sequence[Mapping[str, Any]] | None = None
    dynamic_marked: Sequence[str] | None = None
    post_grad_graphs: Sequence[Sequence[str]] | None = None
    vs_baseline: Mapping[str, Any] | None = None
    vs_baseline_missing: str | None = None


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    """The outcome, its one-line reason and the thresholds used (the workload's allow-graph-breaks among them)."""
    allow_graph_breaks = bool(spec.params.get("allow_graph_breaks"))
    opts = m.compile_options or {}
    call = call_text(opts, bool(opts.get("fullgraph")))
    said = f"{call}: " if opts else ""
    env = _environment(m)
    if m.compile_error:
        return Judged(Outcome.FAILED, f"{call} raises {m.compile_error}: the model does not compile{env}",
                      {"rtol": m.rtol, "atol": m.atol})
    outcome, reason, thresholds = closeness.judge(m.to_dict(), "compile", spec.dtype)
    if allow_graph_breaks:
        thresholds = {**thresholds, "allow_graph_breaks": True}
    notes, failures = _notes_and_failures(m, opts)
    across = _against_baseline(m, spec.dtype)
    if across is not None:
        passed, text = across
        (notes if passed else failures).append(text)
    elif m.vs_baseline_missing:
        notes.append(f"not compared with the baseline's compiled outputs: {m.vs_baseline_missing}")
    tail = "".join(f"; {n}" for n in notes) + env
    if failures:
        here = "" if outcome is Outcome.PASSED else f"; {reason}"
        return Judged(Outcome.FAILED, f"{said}{'; '.join(failures)}{here}{tail}", thresholds)
    return Judged(outcome, f"{said}{reason}{tail}", thresholds)


def _notes_and_failures(m: Metrics, opts: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """What a reason says beside the tensors (graph breaks, a training step not compiled, the sizes), and what fails."""
    notes, failures = [], []
    if m.graph_breaks:
        notes.append(f"{plural(int(m.graph_breaks), 'graph break')}: "
                     f"{'; '.join(m.graph_break_reasons or ['no reason recorded'])[:200]}")
    if m.training_step_error:
        notes.append(f"forward only: the compiled training step raised {str(m.training_step_error)[:160]}")
    if m.fullgraph_error:
        if opts.get("fullgraph"):
            failures.append(f"fullgraph=True, which the workload's compile config asks for, fails: "
                            f"{str(m.fullgraph_error)[:160]}")
        else:
            notes.append(f"fullgraph=True fails: {str(m.fullgraph_error)[:160]}")
    sizes = m.dynamic_sizes or []
    raised = [s for s in sizes if s.get("error")]
    failures += [f"the compiled model raises at size {s['size']}: {str(s['error'])[:240]}" for s in raised[:2]]
    if sizes:
        notes.append(dynamic_note(m))
    if m.graphs_compiled == 0:
        why = "; ".join(m.dynamo_fallbacks or []) or "no reason recorded by Dynamo"
        failures.insert(0, f"torch.compile compiled no graph: the model ran eagerly, so compiled was compared with eager "
                           f"itself ({why})")
    return notes, failures


def call_text(opts: Mapping[str, Any], fullgraph: bool) -> str:
    """`torch.compile(model, mode='max-autotune-no-cudagraphs', fullgraph=True)`: how it was called, for reasons."""
    args = [f"{k}={opts[k]!r}" for k in ("backend", "mode", "dynamic", "options") if opts.get(k) not in (None, "", {})]
    return f"torch.compile(model{''.join(', ' + a for a in args)}{', fullgraph=True' if fullgraph else ''})"


def dynamic_note(m: Metrics) -> str:
    """`2 other sizes (input0 dim 0 marked dynamic): recompiled at [48, 64] (1 graph)` (or `no recompile`); a size that
    raised is the failure's to name."""
    sizes = m.dynamic_sizes or []
    ran = [s for s in sizes if not s.get("error")]
    again = [f"{s['size']} ({plural(int(s['graphs']), 'graph')})" for s in ran if s.get("graphs")]
    where = f" of the {len(ran)} that ran" if len(ran) < len(sizes) else ""
    return (f"{plural(len(sizes), 'other size')} ({_how_dynamic(m)}): "
            + (f"recompiled at {', '.join(again)}" if again else f"no recompile{where}"))


def _how_dynamic(m: Metrics) -> str:
    marked = m.dynamic_marked or []
    if marked:
        return f"{', '.join(marked)} marked dynamic"
    dynamic = (m.compile_options or {}).get("dynamic")
    return f"dynamic={dynamic}" if dynamic is not None else "no dimension marked dynamic"


def _against_baseline(m: Metrics, dtype: str) -> tuple[bool, str] | None:
    """(passed, what it says) of the compiled outputs against the baseline's; None outside compare."""
    sub = m.vs_baseline
    if not isinstance(sub, Mapping):
        return None
    outcome, reason, _ = closeness.judge(sub, "cross-version", dtype)
    whose = f"baseline {sub.get('baseline_torch')}'s"
    one_side = sub.get("one_side_only") or []
    apart = f" ({', '.join(one_side[:3])} on one side only)" if one_side else ""
    if outcome is Outcome.PASSED:
        return True, f"against {whose} compiled outputs and fp64 golden: {reason}{apart}"
    return False, (f"the compiled outputs differ from {whose} compiled outputs (judged against its fp64 golden, the "
                   f"cross-version rule): {reason}{apart}")


def _environment(m: Metrics) -> str:
    env = m.compile_env or {}
    return f"; compiled with {', '.join(f'{k}={v}' for k, v in list(env.items())[:4])[:200]} set" if env else ""


def judge_in_compare(before: CheckResult, after: CheckResult, baseline: Report, candidate: Report,
                     fail_on: Collection[str]) -> CheckResult:
    """The candidate's compile check, both sides' passed: a graph break or a recompile the baseline did not have
    turns compiled code back into slow eager code; so does a recompile at one of the workload's dynamic sizes (each
    size's graphs against the baseline's at that size). Failed, unless the workload allows graph breaks."""
    label = baseline.label
    m, b = Metrics.from_dict(after.metrics), Metrics.from_dict(before.metrics)
    breaks, was = int(m.graph_breaks or 0), int(b.graph_breaks or 0)
    graphs, graphs_was = int(m.graphs_compiled or 0), int(b.graphs_compiled or 0)
    lost_fullgraph = b.fullgraph is True and m.fullgraph is False
    lost_step = b.training_step is True and m.training_step is False
    recompiled = _new_recompiles(b, m)
    if breaks <= was and graphs <= graphs_was and not lost_fullgraph and not lost_step and not recompiled:
        return after  # the same number of breaks with other words for them is not news
    new_reasons = [x for x in m.graph_break_reasons or [] if x not in (b.graph_break_reasons or [])]
    found = []
    if breaks > was or new_reasons:
        found.append(f"{plural(breaks, 'graph break')} (baseline {label}: {was})"
                     + (f": {'; '.join(new_reasons[:2])}" if new_reasons else ""))
    if lost_fullgraph:
        skipped = [x for x in m.dynamo_fallbacks or [] if x not in (b.dynamo_fallbacks or [])]
        why = f": {str(m.fullgraph_error)[:160]}" if m.fullgraph_error else ""
        found.append(f"no longer one graph (fullgraph=True fails{why})" + (f"; skipped: {skipped[0]}" if skipped else ""))
    if graphs > graphs_was:
        found.append(f"{graphs} graphs compiled, baseline {graphs_was} (a new break or a recompile)")
    if lost_step:
        found.append(f"the compiled training step raises {str(m.training_step_error)[:160]}")
    if recompiled:
        found.append("recompiled at " + ", ".join(f"size {size} ({plural(n, 'graph')}, baseline {label}: {n_was})"
                                                  for size, n, n_was in recompiled[:3]))
    cost = ("each recompile is a compile in the middle of serving or training, and past the recompile limit the model "
            "runs eagerly" if recompiled and len(found) == 1 else "the compiled model runs partly eager")
    metrics = {**after.metrics, "baseline_graph_breaks": was, "baseline_graphs_compiled": graphs_was,
               "new_graph_break_reasons": new_reasons}
    diff = first_graph_difference(b.post_grad_graphs, m.post_grad_graphs)
    if diff:
        metrics["first_graph_difference"] = diff
        found.append(f"the post-grad graphs first differ at {diff['where']}: baseline {diff['baseline']}, candidate "
                     f"{diff['candidate']}")
    if after.thresholds.get("allow_graph_breaks"):
        return replace(after, metrics=metrics, reason=f"{after.reason}; new in the candidate, allowed by the "
                                                      f"workload's allow-graph-breaks: {'; '.join(found)}")
    return replace(after, outcome=Outcome.FAILED, metrics=metrics,
                   reason=f"new in the candidate: {'; '.join(found)} ({cost}; set allow-graph-breaks: true on the "
                          f"workload to accept it)")


def _new_recompiles(before: Metrics, after: Metrics) -> list[tuple[str, int, int]]:
    """(size, graphs compiled there, the baseline's) for each dynamic size where the candidate compiled more graphs
    than the baseline did (a size the baseline did not run counts as none there)."""
    was = {s.get("size"): int(s.get("graphs") or 0) for s in before.dynamic_sizes or []}
    return [(str(s.get("size")), int(s.get("graphs") or 0), was.get(s.get("size"), 0))
            for s in after.dynamic_sizes or [] if int(s.get("graphs") or 0) > was.get(s.get("size"), 0)]


def first_graph_difference(before: Any, after: Any) -> dict[str, str] | None:
    """Where two sides' post-grad graphs (one line per node, as the compile check keeps them in report.json) first
    differ: graph and node, and each side's node there; None where they agree or a side kept none."""
    if not isinstance(before, list) or not isinstance(after, list) or not before:
        return None
    for g, (old, new) in enumerate(zip(before, after)):
        for n in range(max(len(old), len(new))):
            a = old[n] if n < len(old) else "(the graph ends)"
            b = new[n] if n < len(new) else "(the graph ends)"
            if a != b:
                return {"where": f"graph {g + 1}, node {n + 1}", "baseline": a, "candidate": b}
    if len(before) != len(after):
        return {"where": f"graph {min(len(before), len(after)) + 1}", "baseline": f"{len(before)} graphs",
                "candidate": f"{len(after)} graphs"}
    return None
