"""The compile checks' rule (compile, compile-mode): torch.compile's outputs against eager's, as the workload compiles
(pure).

- A model that does not compile at all (`compile_error`) fails with torch's first line and the call that raised.
- Outputs and training-step gradients by closeness's compile rule (eager in the same dtype the reference); with the
  factory's dynamic_inputs each other size's outputs too (tensors named `size [48, 64]:output`), and a size whose
  compiled run raised fails, named.
- torch.compile compiling no graph fails (eager compared with eager); so does fullgraph=True failing where the
  workload's `compile:` sets `fullgraph: true` (elsewhere it is said: the model was judged with its breaks).
- In compare, the candidate's compiled outputs and gradients against the baseline's compiled ones and the baseline's
  fp64 golden (`vs_baseline`, closeness's cross-version rule): a change that moves eager and compiled alike passes
  compile against eager in its own version, and fails here.
Graph breaks, recompiles and graphs new since the baseline are judged across the two reports
(analysis.sides.judge_against_baseline), recompiles per size among them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.analysis.closeness import plural_of as plural
from torch_upgrade_check.model import Outcome


def judge(m: Mapping[str, Any], dtype: str, *, allow_graph_breaks: bool = False) -> tuple[Outcome, str, dict[str, Any]]:
    """The outcome, its one-line reason and the thresholds used."""
    opts = m.get("compile_options") or {}
    call = call_text(opts, bool(opts.get("fullgraph")))
    said = f"{call}: " if opts else ""
    env = _environment(m)
    if m.get("compile_error"):
        thresholds = {"rtol": m.get("rtol"), "atol": m.get("atol")}
        return Outcome.FAILED, f"{call} raises {m['compile_error']}: the model does not compile{env}", thresholds
    outcome, reason, thresholds = closeness.judge(m, "compile", dtype)
    if allow_graph_breaks:
        thresholds = {**thresholds, "allow_graph_breaks": True}
    notes = []
    if m.get("graph_breaks"):
        notes.append(f"{plural(int(m['graph_breaks']), 'graph break')}: "
                     f"{'; '.join(m.get('graph_break_reasons') or ['no reason recorded'])[:200]}")
    if m.get("training_step_error"):
        notes.append(f"forward only: the compiled training step raised {str(m['training_step_error'])[:160]}")
    failures = []
    if m.get("fullgraph_error"):
        if opts.get("fullgraph"):
            failures.append(f"fullgraph=True, which the workload's compile config asks for, fails: "
                            f"{str(m['fullgraph_error'])[:160]}")
        else:
            notes.append(f"fullgraph=True fails: {str(m['fullgraph_error'])[:160]}")
    sizes = m.get("dynamic_sizes") or []
    raised = [s for s in sizes if s.get("error")]
    failures += [f"the compiled model raises at size {s['size']}: {str(s['error'])[:240]}" for s in raised[:2]]
    if sizes:
        notes.append(dynamic_note(m))
    if m.get("graphs_compiled") == 0:
        why = "; ".join(m.get("dynamo_fallbacks") or []) or "no reason recorded by Dynamo"
        failures.insert(0, f"torch.compile compiled no graph: the model ran eagerly, so compiled was compared with eager "
                           f"itself ({why})")
    across = _against_baseline(m, dtype)
    if across is not None:
        passed, text = across
        (notes if passed else failures).append(text)
    elif m.get("vs_baseline_missing"):
        notes.append(f"not compared with the baseline's compiled outputs: {m['vs_baseline_missing']}")
    tail = "".join(f"; {n}" for n in notes) + env
    if failures:
        here = "" if outcome is Outcome.PASSED else f"; {reason}"
        return Outcome.FAILED, f"{said}{'; '.join(failures)}{here}{tail}", thresholds
    return outcome, f"{said}{reason}{tail}", thresholds


def call_text(opts: Mapping[str, Any], fullgraph: bool) -> str:
    """`torch.compile(model, mode='max-autotune-no-cudagraphs', fullgraph=True)`: how it was called, for reasons."""
    args = [f"{k}={opts[k]!r}" for k in ("backend", "mode", "dynamic", "options") if opts.get(k) not in (None, "", {})]
    return f"torch.compile(model{''.join(', ' + a for a in args)}{', fullgraph=True' if fullgraph else ''})"


def dynamic_note(m: Mapping[str, Any]) -> str:
    """`2 other sizes (input0 dim 0 marked dynamic): recompiled at [48, 64] (1 graph)` (or `no recompile`); a size that
    raised is the failure's to name."""
    sizes = m.get("dynamic_sizes") or []
    ran = [s for s in sizes if not s.get("error")]
    again = [f"{s['size']} ({plural(int(s['graphs']), 'graph')})" for s in ran if s.get("graphs")]
    where = f" of the {len(ran)} that ran" if len(ran) < len(sizes) else ""
    return (f"{plural(len(sizes), 'other size')} ({_how_dynamic(m)}): "
            + (f"recompiled at {', '.join(again)}" if again else f"no recompile{where}"))


def _how_dynamic(m: Mapping[str, Any]) -> str:
    marked = m.get("dynamic_marked") or []
    if marked:
        return f"{', '.join(marked)} marked dynamic"
    dynamic = (m.get("compile_options") or {}).get("dynamic")
    return f"dynamic={dynamic}" if dynamic is not None else "no dimension marked dynamic"


def _against_baseline(m: Mapping[str, Any], dtype: str) -> tuple[bool, str] | None:
    """(passed, what it says) of the compiled outputs against the baseline's; None outside compare."""
    sub = m.get("vs_baseline")
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


def _environment(m: Mapping[str, Any]) -> str:
    env = m.get("compile_env") or {}
    return f"; compiled with {', '.join(f'{k}={v}' for k, v in list(env.items())[:4])[:200]} set" if env else ""
