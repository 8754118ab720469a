"""Workflow commands escaped by GitHub's rules and capped at 10 errors and 10 warnings; outputs add up."""

from __future__ import annotations

import dataclasses

import pytest
from report_cases import cases, check, report

from torch_upgrade_check.model import Outcome
from torch_upgrade_check.report.annotations import annotations, command, escape_data, escape_property
from torch_upgrade_check.report.outputs import action_outputs

CASES = cases()


def _unescape(text: str) -> str:
    for code, ch in (("%3A", ":"), ("%2C", ","), ("%0A", "\n"), ("%0D", "\r"), ("%25", "%")):
        text = text.replace(code, ch)
    return text


def _parse(line: str) -> tuple[str, str, str]:
    """As the runner reads a command: `::name props::data`, the first `::` after the props ending them."""
    assert line.startswith("::") and "\n" not in line and "\r" not in line
    head, data = line[2:].split("::", 1)
    name, props = head.split(" ", 1)
    key, title = props.split("=", 1)
    assert key == "title" and "," not in title and ":" not in title
    return name, _unescape(title), _unescape(data)


def test_escaping_follows_github_rules() -> None:
    assert escape_data("50% a\r\nb:c,d") == "50%25 a%0D%0Ab:c,d"
    assert escape_property("50% a\r\nb:c,d") == "50%25 a%0D%0Ab%3Ac%2Cd"
    assert command("error", "t: x, y", "line 1\nline 2 %0A") == "::error title=t%3A x%2C y::line 1%0Aline 2 %250A"


def test_hostile_names_round_trip() -> None:
    (line,) = annotations(CASES["hostile_names"])
    name, title, message = _parse(line)
    assert name == "error"
    assert title.startswith("evil|name`code`<script>alert(1)</script>\\nnext%0A,a:b\\x00\\u202e\\ud800 ```[float32]/")
    assert message.startswith("max_abs_err 3e-2 > atol | evil|name`code`<script>alert(1)</script>\nnext%0A,a:b\\x00")
    assert "\nrepro: torch-upgrade-check run --only 'evil|name" in message


def test_capped_at_ten_each_then_one_notice() -> None:
    results = [check(f"w{i}", "numerics", Outcome.FAILED, reason=f"bad {i}") for i in range(25)]
    results += [check(f"w{i}", "latency", Outcome.SKIPPED, device="cuda", reason="no GPU") for i in range(15)]
    lines = annotations([report(*results)])
    kinds = [_parse(line)[0] for line in lines]
    assert kinds == ["error"] * 10 + ["warning"] * 10 + ["notice"]
    assert _parse(lines[-1])[2] == "and 15 more failing checks and 5 more warnings: see the job summary"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("all_passed", []),
        ("crash_and_timeout", ["error"] * 4),
        ("infra_error", ["error"]),
        ("nothing_ran", ["error"]),
        ("skipped_device", ["error"] + ["warning"] * 9),
        ("fell_back_to_cpu", ["warning"]),
        ("comparison_clean", []),
        ("comparison_regression", ["error"] * 3 + ["warning"]),  # the baseline's own failure is not annotated
    ],
)
def test_what_gets_annotated(case: str, expected: list[str]) -> None:
    assert [_parse(line)[0] for line in annotations(CASES[case])] == expected


def test_outputs_merge_verdicts_and_sum_counts() -> None:
    out = action_outputs(CASES["matrix"], {"report": "r.json"})
    assert out == {"verdict": "failed", "passed": "16", "suspicious": "0", "shared-failures": "0", "failed": "1", "errors": "0", "skipped": "1",
                   "not-run": "0", "total": "18", "not-judged": "0", "report": "r.json"}
    assert action_outputs(CASES["all_passed"], {})["verdict"] == "passed"
    assert action_outputs(CASES["all_passed"] + CASES["infra_error"] + CASES["matrix"], {})["verdict"] == "error"
    assert action_outputs(CASES["crash_and_timeout"], {})["errors"] == "2"
    assert action_outputs([], {})["verdict"] == "failed"  # nothing ran fails by default
    with pytest.raises(ValueError, match="overwrite"):
        action_outputs([], {"verdict": "x"})


def test_comparison_annotations_name_the_check_ratio_ci_and_divergent_module() -> None:
    parsed = [_parse(line) for line in annotations(CASES["comparison_regression"])]
    by_title = {title: (name, message) for name, title, message in parsed}
    name, message = by_title["resnet18[float32]/latency regressed on cuda candidate 2.13.0"]
    assert name == "error"
    assert message.startswith("regression: latency 1.32× slower (95% CI 1.27–1.37), 10 ms → 13.2 ms; confirmed in 3 of 3")
    assert "confirmed in 3 of 3 fresh process pairs" in message.splitlines()[0]
    name, message = by_title["resnet18[float32]/memory regressed on cuda candidate 2.13.0"]
    assert name == "error" and message.startswith("regression: peak memory 1.25× more")
    name, message = by_title["transformer_block[float32]/cross-version failed on cuda candidate 2.13.0"]
    assert name == "error" and "first divergent module: layers.0.self_attn (max abs err 0.0123)" in message
    name, message = by_title["transformer_block[float32]/latency suspicious on cuda candidate 2.13.0"]
    assert name == "warning" and "1.14× slower (95% CI 1.02–1.26)" in message and "repro:" not in message
    assert not any("baseline" in title for title in by_title)


def test_comparison_outputs_leave_the_baseline_out() -> None:
    baseline, candidate = CASES["comparison_regression"]
    out = action_outputs([baseline, candidate], {})
    assert out["verdict"] == "failed"
    assert (out["passed"], out["suspicious"], out["failed"], out["total"]) == ("8", "1", "3", "12")
    clean_candidate = CASES["comparison_clean"][1]
    # The baseline failed a check; the candidate did not: the baseline informs and does not decide.
    assert action_outputs([baseline, clean_candidate], {})["verdict"] == "passed"
    assert annotations([baseline, clean_candidate]) == []
    # A baseline that could not run at all leaves nothing to compare with: an error, not a pass.
    broken = dataclasses.replace(baseline, results=(), infra_error="pip could not install torch==2.12.0")
    assert action_outputs([broken, clean_candidate], {})["verdict"] == "error"
    assert [_parse(line)[0] for line in annotations([broken, clean_candidate])] == ["error"]


def test_suspicious_warns_and_does_not_fail() -> None:
    only = report(check("a", "latency", Outcome.SUSPICIOUS, reason="noisy"), check("b", "numerics"))
    assert action_outputs([only], {})["verdict"] == "passed"
    assert [_parse(line)[0] for line in annotations([only])] == ["warning"]
