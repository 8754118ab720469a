"""The job summary as GitHub renders it (cmark-gfm): verdict first, whole tables, safe names, the size budget."""

from __future__ import annotations

import cmarkgfm
import lxml.html
import pytest
from cmarkgfm.cmark import Options
from report_cases import cases, check, oversized, report

from torch_upgrade_check.model import Outcome
from torch_upgrade_check.report.summary import headline, render_summary

CASES = cases()
TRUNCATED = "truncated to stay under GitHub's 1 MiB summary limit; see report.json"


def _html(markdown: str, *, tagfilter: bool = False) -> lxml.html.HtmlElement:
    """Rendered with raw HTML allowed and, by default, without GitHub's tag filter: our escaping alone must hold."""
    extensions = ["table", "autolink", "strikethrough", "tasklist", *(["tagfilter"] if tagfilter else [])]
    html = cmarkgfm.markdown_to_html_with_extensions(markdown, options=Options.CMARK_OPT_UNSAFE, extensions=extensions)
    return lxml.html.fromstring(f"<div>{html}</div>")


def _tables(doc: lxml.html.HtmlElement) -> list[list[list[str]]]:
    return [[[cell.text_content() for cell in tr.xpath("./th|./td")] for tr in t.iter("tr")] for t in doc.iter("table")]


def _assert_tables_whole(doc: lxml.html.HtmlElement) -> None:
    for table in _tables(doc):
        assert len({len(row) for row in table}) == 1, table  # no cell added or lost by a name


@pytest.mark.parametrize("case", sorted(CASES))
def test_renders_with_whole_tables_and_no_injected_html(case: str) -> None:
    text = render_summary(CASES[case])
    assert text.startswith(("## ✅ passed\\: ", "## ❌ failed\\: ", "## 💥 error\\: "))  # the verdict comes first
    for tagfilter in (False, True):
        doc = _html(text, tagfilter=tagfilter)
        _assert_tables_whole(doc)
        assert not doc.xpath("//script|//img|//b|//iframe|//style"), case
        assert doc.xpath("//details/summary"), "the environment <details> block must survive"


def test_verdict_lines() -> None:
    assert headline(CASES["all_passed"]) == "✅ passed: 9 checks on cpu"
    assert headline(CASES["correctness_failure"]) == "❌ failed: 2 correctness failures — 9 checks on cpu"
    assert headline(CASES["latency_failure"]) == "❌ failed: 1 latency failure — 9 checks on cpu"
    assert headline(CASES["crash_and_timeout"]) == "❌ failed: 2 errors, 2 not run — 5 checks on cpu"
    assert headline(CASES["nothing_ran"]) == "❌ failed: nothing ran — 0 checks on cpu"
    assert headline(CASES["infra_error"]).startswith("💥 error: the run on cpu 2.13.0+cpu could not happen (")
    assert headline(CASES["matrix"]) == "❌ failed: 1 latency failure — 18 checks on cpu, cuda, mps"
    assert headline([]) == "❌ failed: no reports, so nothing ran"


def test_failing_rows_come_first_with_repro_and_details() -> None:
    doc = _html(render_summary(CASES["correctness_failure"]))
    numerics = next(t for t in _tables(doc) if t[0][:2] == ["check", "outcome"] and "mismatched" in t[0])
    assert numerics[1][:2] == ["resnet18[bfloat16]/numerics", "❌ failed"]
    assert numerics[1][4] == "0.42% (4,200 of 1,000,000)"
    code = [c.text_content() for c in doc.xpath("//pre/code")]
    assert any("torch-upgrade-check run --device cpu --only 'resnet18[bfloat16]/numerics'" in c for c in code)
    summaries = [s.text_content() for s in doc.xpath("//details/summary")]
    assert any(s.startswith("❌ resnet18[bfloat16]/numerics on cpu 2.13.0+cpu: max_abs_err 0.031") for s in summaries)
    details = doc.xpath("//details[summary[starts-with(., '❌ resnet18')]]")[0]
    assert details.xpath(".//table") and "index (0, 3, 17, 9)" in details.text_content()


def test_units_are_chosen_per_table() -> None:
    def latency(name: str, ms: float):
        return check(name, "latency", metrics={"median_ms": ms, "iqr_ms": ms / 10, "samples_ms": [ms] * 5})

    text = render_summary([report(latency("a", 0.012), latency("b", 0.034), check("m", "memory",
                                  metrics={"peak_bytes": 3 * 1024**3, "memory_api": "torch.cuda.max_memory_allocated"}))])
    header = {t[0][2]: t for t in _tables(_html(text)) if len(t[0]) > 2}
    assert header["median (µs)"][1][2:5] == ["34", "3.4", "5"]
    assert header["peak (GiB)"][1][2] == "3"


def test_matrix_shows_missing_checks_as_not_run_there() -> None:
    doc = _html(render_summary(CASES["matrix"]))
    grid = next(t for t in _tables(doc) if t[0] == ["check", "cpu 2.13.0+cpu", "cuda 2.13.0+cu126", "mps 2.13.0"])
    rows = {row[0]: row[1:] for row in grid[1:]}
    assert rows["resnet18[float32]/latency"] == ["✅ 12.4 ms", "❌ 19.7 ms", "—"]
    assert rows["only_on_mps[float32]/numerics"][:2] == ["—", "—"]
    assert rows["mlp[float32]/determinism"][1:] == ["—", "—"]
    assert len(rows) == 10 and grid[1][0] == "resnet18[float32]/latency"  # failing row first


def test_hostile_names_show_literally_in_one_cell() -> None:
    doc = _html(render_summary(CASES["hostile_names"]))
    numerics = next(t for t in _tables(doc) if "mismatched" in t[0])
    assert numerics[1][0].startswith("evil|name`code`<script>alert(1)</script>\\nnext%0A,a:b\\x00\\u202e\\ud800 ```")
    assert numerics[1][-1].startswith("max_abs_err 3e-2 > atol | evil|name")
    details = doc.xpath("//details[summary[starts-with(., '❌ evil')]]")[0]
    assert "</details>\n<script>alert(2)</script>" in details.xpath(".//pre/code")[0].text_content()
    env = next(t for t in _tables(doc) if t[0][0] == "")
    assert ["os", "Linux | <script>alert(4)</script>"] in env and ["cpu", "a b"] in env


def test_oversized_report_is_truncated_on_purpose() -> None:
    big = oversized()
    text = render_summary([big])
    assert len(text.encode("utf-8")) < 900_000 < 1024**2
    assert TRUNCATED in text.splitlines()[2]  # right under the verdict line
    failing = [r.id for r in big.results if r.outcome is Outcome.FAILED]
    assert len(failing) == 500
    doc = _html(text)
    _assert_tables_whole(doc)
    shown = [row[0] for t in _tables(doc) for row in t[1:]]
    assert set(failing) <= set(shown)  # every failing row kept; passing rows were dropped
    assert len(shown) < len(big.results)


@pytest.mark.parametrize("budget", [600, 3_000, 20_000, 150_000])
def test_any_budget_is_kept_and_the_verdict_survives(budget: int) -> None:
    big = oversized(2_000)
    text = render_summary([big], budget_bytes=budget)
    assert len(text.encode("utf-8")) <= budget
    assert text.startswith("## ❌ failed")
    assert "truncated to stay under" in text or "cut to stay under" in text


def test_small_report_is_not_truncated() -> None:
    text = render_summary(CASES["matrix"])
    assert "truncated" not in text and "not shown" not in text


def test_passing_rows_only_once_every_failing_row_fits() -> None:
    big = oversized(2_000)
    text = render_summary([big], budget_bytes=3_000)
    shown = [row for t in _tables(_html(text)) for row in t[1:] if len(row) > 2]
    assert shown and all(row[1] == "❌ failed" for row in shown if row[1] in ("❌ failed", "✅ passed"))
    assert "44 of them failing" in text
