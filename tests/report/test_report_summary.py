"""The job summary as GitHub renders it (cmark-gfm): verdict first, whole tables, safe names, the size budget."""

from __future__ import annotations

import dataclasses

import cmarkgfm
import lxml.html
import pytest
from cmarkgfm.cmark import Options
from report_cases import GOLDEN, cases, check, oversized, report

from torch_upgrade_check.model import ASPECTS, CheckResult, Outcome
from torch_upgrade_check.report import CORRECTNESS_ASPECTS, worst_tensor
from torch_upgrade_check.report.outputs import action_outputs
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


def _visible(markdown: str) -> str:
    """The Markdown a reader sees without opening anything: all but the <details> blocks (which the summary
    opens and closes at line starts; user text inside them is escaped or fenced)."""
    depth, kept = 0, []
    for line in markdown.splitlines(keepends=True):
        if depth == 0 and "<details>" not in line:
            kept.append(line)
        depth += line.count("<details>") - line.count("</details>")
    assert depth == 0, "a <details> block is left open"
    return "".join(kept)


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


def test_the_first_line_names_each_sides_installed_torch() -> None:
    assert headline(CASES["comparison_clean"]).endswith(", torch 2.12.0 → 2.13.0")
    baseline, candidate = CASES["comparison_clean"]
    same = [dataclasses.replace(baseline, label="2.13.0+cpu"), dataclasses.replace(candidate, label="2.13.0+cpu")]
    assert headline(same).endswith(", torch 2.13.0+cpu on both sides"), headline(same)  # only the stacks differ
    assert render_summary(same).splitlines()[0].endswith(r"torch 2\.13\.0\+cpu on both sides")  # Markdown-escaped


def test_failing_rows_come_first_with_repro_and_details() -> None:
    doc = _html(render_summary(CASES["correctness_failure"]))
    numerics = next(t for t in _tables(doc) if t[0][:2] == ["check", "outcome"] and "mismatched" in t[0])
    assert numerics[0] == ["check", "outcome", "tensors", "worst tensor", "max abs err", "max rel err", "mismatched",
                           "limits", "reason"]
    assert numerics[1][:5] == ["resnet18[bfloat16]/numerics", "❌ failed", "3", "grad:conv1.weight", "0.031"]
    assert numerics[1][6] == "0.796% (4,212 of 529,408)" and len(numerics) == 2  # the passing check is further down
    code = [c.text_content() for c in doc.xpath("//pre/code")]
    assert any("torch-upgrade-check run --device cpu --only 'resnet18[bfloat16]/numerics'" in c for c in code)
    summaries = [s.text_content() for s in doc.xpath("//details/summary")]
    assert any(s.startswith("❌ resnet18[bfloat16]/numerics on cpu 2.13.0+cpu: 1 of 3 tensors differ") for s in summaries)
    details = doc.xpath("//details[summary[starts-with(., '❌ resnet18')]]")[0]
    assert details.xpath(".//table") and "grad:conv1.weight(0, 3, 5, 1)" in details.text_content()


def test_units_are_chosen_per_table() -> None:
    def latency(name: str, ms: float):
        return check(name, "latency", metrics={"median_ms": ms, "iqr_ms": ms / 10, "samples_ms": [ms] * 5})

    text = render_summary([report(latency("a", 0.012), latency("b", 0.034), check("m", "memory",
                                  metrics={"peak_bytes": 3 * 1024**3, "memory_api": "torch.cuda.max_memory_allocated"}))])
    header = {t[0][2]: t for t in _tables(_html(text)) if len(t[0]) > 2}
    assert header["median (µs)"][1][2:5] == ["34", "3.4", "5"]
    assert header["peak (GiB)"][1][2] == "3"


def test_matrix_shows_missing_checks_as_not_run_there() -> None:
    text = render_summary(CASES["matrix"])
    header = ["check", "cpu 2.13.0+cpu", "cuda 2.13.0+cu126", "mps 2.13.0"]
    # the checks that need attention somewhere open, with how the other runs fared; the others collapsed
    (failing,) = [t for t in _tables(_html(_visible(text))) if t[0] == header]
    assert failing[1:] == [["resnet18[float32]/latency", "✅ 12.4 ms", "❌ 19.7 ms", "—"]]
    grids = [t for t in _tables(_html(text)) if t[0] == header]
    assert len(grids) == 2
    rows = {row[0]: row[1:] for row in grids[1][1:]}
    assert rows["only_on_mps[float32]/numerics"][:2] == ["—", "—"]
    assert rows["mlp[float32]/determinism"][1:] == ["—", "—"]
    assert rows["resnet18[float32]/numerics"] == ["✅ 1.20e-07", "✅ 1.20e-07", "⏭️"]
    assert len(rows) == 9 and "resnet18[float32]/latency" not in rows
    assert "Matrix (1 of the 10 checks × 3 runs)" in text and "Matrix (9 of the 10 checks × 3 runs)" in text


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
    assert "45 of them failing" in text


def _comparison_big(n: int = 3_000) -> list:
    """A comparison far over a small budget: n unchanged latency checks, 20 regressions and 20 suspicious."""
    from report_cases import _ab, _latency

    base, cand = [], []
    for i in range(n):
        change = "regression" if i % 150 == 0 else "suspicious" if i % 150 == 75 else "unchanged"
        ratio = {"regression": 1.5, "suspicious": 1.2}.get(change, 1.0)
        base.append(_latency(f"w{i:05d}", 1.0))
        cand.append(_ab(f"w{i:05d}", "latency", change, 1.0, ratio, confirmed=change == "regression"))
    return [report(*base, role="baseline", label="2.12.0"), report(*cand, role="candidate", label="2.13.0")]


def _what_changed(doc: lxml.html.HtmlElement, unit: str) -> list[list[str]]:
    return next(t for t in _tables(doc) if t[0][:2] == ["check", f"baseline ({unit})"])


def test_comparison_verdict_lines() -> None:
    assert headline(CASES["comparison_clean"]) == "✅ passed: 8 checks on cpu, torch 2.12.0 → 2.13.0"
    assert headline(CASES["comparison_regression"]) == (
        "❌ failed: 1 correctness failure, 1 latency regression, 1 memory regression, 1 suspicious — "
        "12 checks on cuda, torch 2.12.0 → 2.13.0")
    baseline, clean = CASES["comparison_regression"][0], CASES["comparison_clean"][1]
    assert headline([baseline, clean]).startswith("✅ passed: 8 checks on cpu")  # the baseline's failure informs only
    assert headline([report(check("a", "latency", Outcome.SUSPICIOUS), check("b", "numerics"))]) == (
        "✅ passed: 2 checks on cpu (1 suspicious)")


def test_what_changed_orders_regressions_suspicious_improved_then_unchanged() -> None:
    text = render_summary(CASES["comparison_regression"])
    assert text.index("### What needs attention") < text.index("#### Latency, torch 2\\.12\\.0 → 2\\.13\\.0 on cuda")
    doc = _html(text)
    latency = _what_changed(doc, "ms")  # open: what needs attention, with the analysis's one-line reasons
    assert latency[0] == ["check", "baseline (ms)", "candidate (ms)", "ratio (95% CI)", "pairs", "verdict"]
    assert [row[0] for row in latency[1:]] == ["resnet18[float32]/latency", "transformer_block[float32]/latency"]
    assert latency[1][1:5] == ["10", "13.2", "1.32× (1.27–1.37)", "3 of 3 agree"]
    assert latency[1][5] == ("🔺 regression: latency 1.32× slower (95% CI 1.27–1.37), 10 ms → 13.2 ms; confirmed in 3 "
                             "of 3 fresh process pairs; threshold 1.10×, 72 rounds in 3 process pairs")
    assert latency[2][4] == "1 of 3 agree" and latency[2][5].startswith("⚠️ suspicious: latency 1.14× slower")
    # the cell is cut to a readable width; the whole reason, with what deciding would cost, is in its <details>
    assert len(latency[2][5]) <= 165 and latency[2][5].endswith("…")  # 160 and the icon
    (suspicious,) = doc.xpath("//details[summary[starts-with(., '⚠️ transformer_block[float32]/latency')]]")
    assert "".join(suspicious.itertext()).strip().endswith(
        "about 4 more process pairs, ~48 s of measuring beyond its 20 s budget (raise ab-budget: the input, the config "
        "key or --ab-budget)")
    (rest,) = doc.xpath("//details[summary[starts-with(., 'The other')]]")
    (others,) = [t for t in _tables(rest) if t[0][:2] == ["check", "baseline (ms)"]]  # collapsed: the rest
    assert others[1:] == [["mlp[float32]/latency", "0.1", "0.08", "0.80× (0.77–0.83)", "3 of 3 agree", "🟢 improved"],
                          ["cnn[float32]/latency", "4", "4.08", "1.02× (1.00–1.04)", "1", "➖ unchanged"]]
    memory = _what_changed(doc, "MiB")
    assert memory[1][:5] == ["resnet18[float32]/memory", "1,024", "1,280", "1.25× (exact)", "3 of 3 agree"]
    assert memory[1][-1].startswith("🔺 regression: peak memory 1.25× more") and len(memory) == 2


def test_a_significant_change_inside_the_threshold_is_not_called_unchanged() -> None:
    """cnn 1.09× slower (95% CI 1.07–1.10) is inside the 10% threshold: it passes and its `change` stays
    `unchanged` for gating, but the verdict says what was measured."""
    base, cand = CASES["comparison_regression"]
    marked = []
    for r in cand.results:
        if r.id == "cnn[float32]/latency":
            r = dataclasses.replace(r, metrics={**r.metrics, "ratio": 1.09, "ci_low": 1.07, "ci_high": 1.10,
                                                "significant": True})
        marked.append(r)
    doc = _html(render_summary([base, dataclasses.replace(cand, results=tuple(marked))]))
    (rest,) = doc.xpath("//details[summary[starts-with(., 'The other')]]")
    (others,) = [t for t in _tables(rest) if t[0][:2] == ["check", "baseline (ms)"]]
    assert others[-1][0] == "cnn[float32]/latency" and others[-1][-1] == "➖ slower, within the 10% threshold"
    assert [r for r in marked if r.id == "cnn[float32]/latency"][0].metrics["change"] == "unchanged"


def test_cross_version_table_shows_failures_first_with_the_divergent_module() -> None:
    doc = _html(render_summary(CASES["comparison_regression"]))
    table = next(t for t in _tables(doc) if "first divergent module" in t[0])
    column = table[0].index("first divergent module")
    assert table[1][:2] == ["transformer_block[float32]/cross-version", "❌ failed"]
    assert table[1][column] == "layers.0.self_attn (max abs err 0.0123)"
    assert table[1][table[0].index("mismatched vs baseline")] == "5,120 of 1,966,080"
    assert table[1][table[0].index("RMSE vs fp64 (candidate / baseline)")] == "3.10e-03 / 1.00e-04 (output)"
    (rest,) = doc.xpath("//details[summary[starts-with(., 'The other')]]")
    passing = next(t for t in _tables(rest) if "first divergent module" in t[0])
    assert passing[1][:2] == ["mlp[float32]/cross-version", "✅ passed"] and len(table) == len(passing) == 2
    code = " ".join(c.text_content() for c in doc.xpath("//pre/code"))
    assert "--only 'transformer_block[float32]/cross-version'" in code
    shown = [row[0] for t in _tables(doc) for row in t[1:]]
    assert shown.count("transformer_block[float32]/cross-version") == 1  # not again in a per-aspect table


def test_environment_diff_shows_torch_and_what_differs() -> None:
    def diff(case: str) -> list[list[str]]:
        return next(t for t in _tables(_html(render_summary(CASES[case]))) if t[0] == ["component", "baseline", "candidate"])

    assert diff("comparison_regression")[1:] == [["torch", "2.12.0", "2.13.0"], ["cuDNN", "90800", "91002"],
                                                 ["NCCL", "2.21.5", "2.26.2"], ["Triton", "3.3.1", "3.4.0"],
                                                 ["package nvidia-cudnn-cu12", "9.8.0.87", "9.10.2.21"]]
    assert diff("comparison_clean")[1:] == [["torch", "2.12.0", "2.13.0"],
                                            ["torch git", "fedcba9876543210", "0123456789abcdef"]]


def test_environment_diff_says_which_package_changes_the_teams_requirements_made() -> None:
    # a pull request that bumps torchvision with torch: its row says the team's files changed it; numpy, moved by
    # the resolver alone, says nothing more
    base, cand = CASES["comparison_clean"]
    packages = {"baseline": {"torchvision": "0.28.0", "numpy": "2.1.3"}, "candidate": {"torchvision": "0.29.1",
                                                                                      "numpy": "2.2.0"}}
    resolved = CheckResult("stack", "resolve", "cpu", "-", Outcome.PASSED, reason="the stack resolves",
                           metrics={"pinned": ["torchvision 0.28.0 -> 0.29.1"], "unasked": ["numpy 2.1.3 -> 2.2.0"]})
    reports = [dataclasses.replace(r, environment={**r.environment, "packages": packages[r.role]},
                                   results=(*r.results, resolved) if r.role == "candidate" else r.results)
               for r in (base, cand)]
    table = next(t for t in _tables(_html(render_summary(reports))) if t[0] == ["component", "baseline", "candidate"])
    assert ["package numpy", "2.1.3", "2.2.0"] in table
    assert ["package torchvision (your requirements changed it)", "0.28.0", "0.29.1"] in table


def test_environment_diff_shows_torch_compile_settings_that_differ_between_the_sides() -> None:
    # a team's TORCHINDUCTOR_* setting on one side only changes what its compile checks compiled: the diff names it
    base, cand = CASES["comparison_clean"]
    settings = {"baseline": {}, "candidate": {"TORCHINDUCTOR_MAX_AUTOTUNE": "1"}}
    reports = [dataclasses.replace(r, environment={**r.environment, "compile_env": settings[r.role]}) for r in (base, cand)]
    table = next(t for t in _tables(_html(render_summary(reports))) if t[0] == ["component", "baseline", "candidate"])
    assert ["torch.compile settings (environment)", "—", "TORCHINDUCTOR_MAX_AUTOTUNE 1"] in table, table


def test_a_baseline_whose_own_checks_crashed_leaves_cross_version_open_and_says_so() -> None:
    # the baseline's torchvision cannot load on this runner: its workloads crash, the candidate's cross-version checks
    # are skipped; the verdict is the candidate's, and what needs attention names the open questions and why
    base, cand = CASES["comparison_clean"]
    crash = "RuntimeError: operator torchvision::nms does not exist"
    saves = tuple(dataclasses.replace(r, outcome=Outcome.ERROR, reason=crash, metrics={})  # the baseline's save steps
                  for r in cand.results if r.aspect == "cross-version")
    crashed = (*(r for r in base.results if r.aspect != "numerics"), *saves)
    skipped = tuple(dataclasses.replace(r, outcome=Outcome.SKIPPED, reason="the baseline saved no outputs for this "
                                        "check") if r.aspect == "cross-version" else r for r in cand.results)
    n = sum(r.aspect == "cross-version" for r in cand.results)
    assert n >= 1
    doc = _html(render_summary([dataclasses.replace(base, results=crashed), dataclasses.replace(cand, results=skipped)]))
    (attention,) = doc.xpath("//h3[. = 'What needs attention']/following-sibling::ul[1]")
    text = attention.text_content()
    assert f"{n} of its own check{'s' if n > 1 else ''} failed or crashed (they inform and do not decide), so " \
           f"{n} cross-version check{'s' if n > 1 else ''} could not be judged: RuntimeError: operator " \
           "torchvision::nms does not exist" in text, text
    assert "baseline" in text
    plain = _html(render_summary(CASES["comparison_clean"]))  # a baseline that ran cleanly adds no line
    assert not plain.xpath("//h3[. = 'What needs attention']")


def _baseline_broke_cross_version(outcome: Outcome) -> tuple[list, int]:
    """comparison_clean with the baseline's cross-version saves ending in `outcome` and the candidate's skipped."""
    base, cand = CASES["comparison_clean"]
    saves = {r.id: dataclasses.replace(r, outcome=outcome, reason="Unsupported: Attempted to call function marked as "
                                       "skipped", metrics={}) for r in cand.results if r.aspect == "cross-version"}
    kept = [r for r in base.results if r.id not in saves]
    skipped = tuple(dataclasses.replace(r, outcome=Outcome.SKIPPED, reason="the baseline saved no outputs for this "
                                        "check") if r.id in saves else r for r in cand.results)
    return [dataclasses.replace(base, results=(*kept, *saves.values())),
            dataclasses.replace(cand, results=skipped)], len(saves)


@pytest.mark.parametrize("outcome", [Outcome.ERROR, Outcome.FAILED, Outcome.NOT_RUN])
def test_cross_version_checks_the_baseline_failed_are_named_in_the_headline_and_counted(outcome: Outcome) -> None:
    # issue 46 item 11: the candidate compared nothing there, so the run is not a plain green; it still passes
    reports, n = _baseline_broke_cross_version(outcome)
    assert n == 2
    line = headline(reports)
    assert line.startswith("⚠️ passed: ") and line.endswith("; 2 cross-version checks not judged: the baseline "
                                                            "failed them"), line
    assert "(2 skipped)" in line
    assert action_outputs(reports, {})["not-judged"] == "2" and action_outputs(reports, {})["skipped"] == "2"
    first = next(r for r in reports[1].results if r.outcome is Outcome.SKIPPED)
    one = [reports[0], dataclasses.replace(reports[1], results=tuple(r for r in reports[1].results if r is not first))]
    assert headline(one).endswith("; 1 cross-version check not judged: the baseline failed it")
    assert render_summary(reports).startswith("## ⚠️ passed")


def test_cross_version_checks_not_judged_join_a_failing_headline_and_a_clean_baseline_adds_nothing() -> None:
    reports, _ = _baseline_broke_cross_version(Outcome.ERROR)
    failing = next(r for r in reports[1].results if r.aspect == "numerics")
    cand = dataclasses.replace(reports[1], results=tuple(
        dataclasses.replace(r, outcome=Outcome.FAILED) if r is failing else r for r in reports[1].results))
    line = headline([reports[0], cand])
    assert line.startswith("❌ failed: 1 correctness failure, 2 cross-version checks not judged: the baseline failed "
                           "them — "), line
    clean = CASES["comparison_clean"]
    assert headline(clean).startswith("✅ passed") and "not judged" not in headline(clean)
    assert action_outputs(clean, {})["not-judged"] == "0"
    # a skip the baseline did not cause (it passed there) is not counted as not judged
    base, cand = clean
    skipped = tuple(dataclasses.replace(r, outcome=Outcome.SKIPPED, reason="the baseline saved no outputs for this "
                                        "check") if r.aspect == "cross-version" else r for r in cand.results)
    assert "not judged" not in headline([base, dataclasses.replace(cand, results=skipped)])


def test_checks_in_one_version_only_are_listed() -> None:
    doc = _html(render_summary(CASES["comparison_regression"]))
    grid = next(t for t in _tables(doc) if t[0] == ["check", "baseline", "candidate"])
    assert grid[1:] == [["flex_attention_alibi[float32]/numerics", "— (not in this version)", "✅ passed"],
                        ["matmul[float32]/latency", "✅ passed", "— (not in this version)"]]
    assert "Only in one version (1 only in the candidate, 1 only in the baseline)" in doc.text_content()
    assert not any(t[0] == ["check", "baseline", "candidate"] for t in _tables(_html(render_summary(CASES["comparison_clean"]))))


def test_baseline_tables_are_collapsed_and_counted_apart() -> None:
    doc = _html(render_summary(CASES["comparison_regression"]))
    counts = next(t for t in _tables(doc) if t[0][:2] == ["run", "verdict"])
    assert counts[1][:2] == ["cuda baseline 2.12.0", "failed (informs only)"]
    assert counts[2][:4] == ["cuda candidate 2.13.0", "failed", "8", "1"]
    (block,) = doc.xpath("//details[summary[starts-with(., 'Baseline checks')]]")
    assert "transformer_block[float32]/compile" in block.text_content() and len(block.xpath(".//table")) == 4
    assert "cuda baseline 2.12.0" not in " ".join(c.text_content() for c in doc.xpath("//pre/code"))  # no repro


def test_a_candidate_without_its_baseline_still_shows_what_changed() -> None:
    candidate = CASES["comparison_regression"][1]
    text = render_summary([candidate])
    assert "#### Latency on cuda candidate 2\\.13\\.0 (threshold +10%): 1 regression, 1 suspicious" in text
    assert "#### What changed on cuda candidate 2\\.13\\.0" in text and "not part of this summary" in text
    assert _what_changed(_html(text), "ms")[1][-1].startswith("🔺 regression: latency 1.32× slower")


def test_oversized_comparison_keeps_changes_before_unchanged_rows() -> None:
    reports = _comparison_big()
    text = render_summary(reports, budget_bytes=60_000)
    assert len(text.encode("utf-8")) <= 60_000
    assert TRUNCATED in text.splitlines()[2]
    doc = _html(text)
    _assert_tables_whole(doc)
    latency = _what_changed(doc, "ms")
    verdicts = [row[-1].split(":")[0] for row in latency[1:]]
    assert verdicts == ["🔺 regression"] * 20 + ["⚠️ suspicious"] * 20
    assert text.count("<details>") == text.count("</details>")
    assert "not shown" not in render_summary(reports)  # 0.5 MB: the default budget holds it all
    full = render_summary(reports, budget_bytes=400_000)  # only the baseline's own rows go, the least needed
    (cut,) = [line for line in full.splitlines() if "not shown to stay under" in line]
    assert full.index(cut) > full.index("<summary>Baseline checks")
    (rest,) = _html(full).xpath("//details[summary[contains(., '2960 unchanged against the baseline')]]")
    assert len(next(t for t in _tables(rest) if t[0][:2] == ["check", "baseline (ms)"])) == 2_960 + 1


@pytest.mark.parametrize("budget", [600, 3_000, 20_000])
def test_any_budget_holds_for_a_comparison(budget: int) -> None:
    text = render_summary(_comparison_big(600), budget_bytes=budget)
    assert len(text.encode("utf-8")) <= budget
    assert text.startswith("## ❌ failed\\: 4 latency regressions\\, 4 suspicious")
    assert text.count("<details>") == text.count("</details>")
    _assert_tables_whole(_html(text))


def test_hostile_strings_in_a_comparison_show_literally() -> None:
    import dataclasses

    from report_cases import HOSTILE

    baseline, candidate = CASES["comparison_regression"]
    results = tuple(dataclasses.replace(r, metrics={**r.metrics, "first_divergent_module": {"module": HOSTILE, "max_abs_err": 1}})
                    if r.aspect == "cross-version" else r for r in candidate.results)
    env = {**candidate.environment, "torch_version": "<b>2.13</b>|x", "triton": HOSTILE}
    candidate = dataclasses.replace(candidate, results=results, environment=env, label=HOSTILE)
    baseline = dataclasses.replace(baseline, label="<img src=x onerror=alert(5)>")
    text = render_summary([baseline, candidate])
    for tagfilter in (False, True):
        doc = _html(text, tagfilter=tagfilter)
        _assert_tables_whole(doc)
        assert not doc.xpath("//script|//img|//b|//iframe|//style")
    diff = next(t for t in _tables(_html(text)) if t[0] == ["component", "baseline", "candidate"])
    assert diff[1] == ["torch", "2.12.0", "<b>2.13</b>|x"]
    table = next(t for t in _tables(_html(text)) if "first divergent module" in t[0])
    assert table[1][table[0].index("first divergent module")].startswith("evil|name`code`<script>")


@pytest.mark.parametrize("case", ["all_passed", "comparison_clean"])
def test_a_passing_run_reads_in_one_screen(case: str) -> None:
    text = (GOLDEN / case / "summary.md").read_text(encoding="utf-8")  # the golden file, as a reviewer gets it
    shown = _visible(text)
    assert len(shown.encode("utf-8")) < 1_500, shown  # was 2,089 and 2,735 bytes of expanded tables
    (counts,) = _tables(_html(shown))  # the counts, and no other table
    assert counts[0][:2] == ["run", "verdict"] and "What needs attention" not in text
    collapsed = _html(text).xpath("//details[summary[starts-with(., '✅ All')]]")[0].text_content()
    for r in CASES[case][-1].results:
        assert r.id in collapsed


def test_what_needs_attention_comes_first_and_the_rest_is_collapsed() -> None:
    text = render_summary(CASES["correctness_failure"])
    shown = _visible(text)
    assert shown.index("### What needs attention") > shown.index("| run | verdict |")
    assert "<summary>The other 7 checks passed</summary>" in text
    open_rows = [row for t in _tables(_html(shown)) for row in t[1:] if row[0] != "cpu 2.13.0+cpu"]
    assert [row[:2] for row in open_rows] == [["resnet18[bfloat16]/numerics", "❌ failed"],
                                              ["transformer_block[float32]/compile", "❌ failed"]]
    passing = "resnet18[float32]/numerics"
    assert passing not in _html(shown).text_content() and passing in _html(text).text_content()
    assert len(shown.encode("utf-8")) < 2_000


def test_correctness_columns_mean_something() -> None:
    text = render_summary(CASES["all_passed"])
    numerics = next(t for t in _tables(_html(text)) if t[1][0] == "resnet18[bfloat16]/numerics")
    assert numerics[0] == ["check", "outcome", "tensors", "worst tensor", "max abs err", "mismatched", "limits", "reason"]
    assert numerics[2][:6] == ["resnet18[float32]/numerics", "✅ passed", "3", "grad:conv1.weight", "1.20e-07",
                               "0 of 529,408"]
    # a relative error against goldens near zero stays in report.json: it says nothing in a passing check
    assert "max rel err" not in text and "15,166,603,265" not in text and "1.52e+10" not in text
    compile_ = next(t for t in _tables(_html(render_summary(CASES["correctness_failure"]))) if "compile (s)" in t[0])
    assert compile_[1][2:8] == ["31", "3", "output (3 NaN)", "inf", "nan", "<0.01% (3 of 1,966,080)"]


def test_worst_tensor_is_the_furthest_off_for_its_scale_nan_first() -> None:
    small = {"name": "grad:w", "scale": 0.001, "rmse": 1e-5}  # 1% of its scale
    large = {"name": "output", "scale": 10.0, "rmse": 1e-2}  # 0.1%, though the larger error
    assert worst_tensor({"per_tensor": [large, small]}) is small
    nan = {"name": "grad:b", "scale": 1.0, "rmse": "inf", "nan": 2}
    assert worst_tensor({"per_tensor": [small, nan, large]}) is nan
    assert worst_tensor({}) is None and worst_tensor({"per_tensor": "garbage"}) is None


def test_columns_empty_in_every_row_are_left_out() -> None:
    tables = _tables(_html(render_summary(CASES["crash_and_timeout"])))
    crashed = next(t for t in tables if t[1][0] == "resnet18[float32]/numerics")
    assert crashed[0] == ["check", "outcome", "reason"]
    timed_out = next(t for t in tables if t[1][0] == "transformer_block[float32]/compile")
    assert timed_out[0] == ["check", "outcome", "reason"]  # no "compile (ns)" over an empty cell


def test_environment_changes_are_open_when_more_than_torch_changed() -> None:
    def diff(case: str, text: str) -> list[list[str]]:
        return [t for t in _tables(_html(text)) if t[0] == ["component", "baseline", "candidate"]]

    regression = render_summary(CASES["comparison_regression"])
    assert diff("", _visible(regression))[0][2] == ["cuDNN", "90800", "91002"]  # often the answer: open
    clean = render_summary(CASES["comparison_clean"])
    assert not diff("", _visible(clean)) and diff("", clean)  # only torch changed: collapsed


def test_runs_that_ran_nothing_or_elsewhere_say_so_in_the_open() -> None:
    shown = _visible(render_summary(CASES["skipped_device"]))
    assert ("**mps 2\\.13\\.0**: nothing ran, which fails: 9 checks skipped: MPS not available\\: probe kernel "
            "failed\\: no Metal device (9)") in shown
    assert "cuda was requested but the checks ran on cpu" in _visible(render_summary(CASES["fell_back_to_cpu"]))
    assert "the run reported no check" in _visible(render_summary(CASES["nothing_ran"]))


def test_correctness_failures_come_first_as_the_headline_names_them() -> None:
    text = render_summary(CASES["comparison_regression"])
    assert text.index("correctness failure") < text.index("latency regression") < text.index("memory regression")
    attention = text[text.index("### What needs attention"):text.index("### Environment changes")]
    cross = attention.index("#### Cross-version correctness")
    assert cross < attention.index("#### Latency") < attention.index("#### Peak memory")


@pytest.mark.parametrize("length", [150, 161, 175, 190, 400])
def test_a_reason_is_shown_once_whole_and_its_details_only_when_the_cell_cut_it(length: int) -> None:
    # the cell cuts a reason at REASON_LIMIT (160); a <summary> line that cut it elsewhere (at 200 with the id)
    # showed a 161-190 character reason whole there and again in the block's body
    reason = ("x" * (length - 4)) + " end"
    text = render_summary([report(check("a", "numerics", Outcome.FAILED, reason=reason), label="2.13.0")])
    doc = _html(text)
    (row,) = [t for t in _tables(doc) if t[0][0] == "check"][0][1:]
    cut = length > 160
    assert row[-1] == (reason[:159] + "…" if cut else reason)
    blocks = doc.xpath("//details[summary[starts-with(., '❌ a[float32]/numerics')]]")
    assert len(blocks) == (1 if cut else 0)  # nothing else (no stderr, no mismatches) to show
    assert text.count(reason) == 1  # the whole reason once: in the block's body when the cell cut it, else in the cell
    if cut:
        (summary,) = blocks[0].xpath("./summary")
        assert summary.text_content() == f"❌ a[float32]/numerics on cpu 2.13.0: {reason[:159]}…"


def test_a_verdict_cell_cuts_its_reason_where_the_details_rule_does() -> None:
    # "suspicious: " before a 158-character reason: cutting the whole cell at 160 lost the reason's end, and the
    # details (whole reason only past 160) did not have it either
    reason = "latency " + "y" * 146 + " end"
    base, cand = CASES["comparison_regression"]
    cand = dataclasses.replace(cand, results=tuple(
        dataclasses.replace(r, reason=reason) if r.id == "transformer_block[float32]/latency" else r
        for r in cand.results))
    doc = _html(render_summary([base, cand]))
    latency = _what_changed(doc, "ms")
    (cell,) = [row[-1] for row in latency[1:] if row[0] == "transformer_block[float32]/latency"]
    assert cell == f"⚠️ suspicious: {reason}"


def test_the_headline_calls_correctness_what_fail_on_correctness_counts() -> None:
    # the headline's groups follow --fail-on's kinds (model.FAIL_KINDS), not a list of its own: a stack that no
    # longer resolves fails under `correctness`, and the headline says so
    assert CORRECTNESS_ASPECTS == {a for a in ASPECTS
                                   if CheckResult("w", a, "cpu", "float32", Outcome.FAILED).fail_kind == "correctness"}
    resolve = check("stack", "resolve", Outcome.FAILED, dtype="-", reason="no resolution")
    assert headline([report(resolve, check("mlp", "numerics"))]) == "❌ failed: 1 correctness failure — 2 checks on cpu"
    compile_time = check("mlp", "compile-time", Outcome.FAILED, metrics={"change": "regression"})
    assert headline([report(compile_time)]).startswith("❌ failed: 1 compile-time regression")


def test_a_saved_aspect_the_baseline_failed_is_not_judged_too_and_numerics_skipped_is_not() -> None:
    """Every aspect held to the baseline's saves (checkpoint here), not cross-version alone: skipped where the
    baseline's check failed, it compared nothing. An aspect judged on its own side (numerics) is not counted."""
    base, cand = CASES["comparison_clean"]
    saved = "checkpoint"  # the case's cross-version results, as a checkpoint check: the same ids on both sides

    def broken(results, outcome, reason=""):
        return tuple(dataclasses.replace(r, aspect=saved, outcome=outcome, reason=reason or r.reason)
                     if r.aspect == "cross-version" else
                     dataclasses.replace(r, outcome=outcome) if r.aspect == "numerics" else r for r in results)

    theirs = tuple(r for r in cand.results if r.aspect == "cross-version")  # the baseline ran its own checkpoint checks
    reports = [dataclasses.replace(base, results=broken((*base.results, *theirs), Outcome.FAILED)),
               dataclasses.replace(cand, results=broken(cand.results, Outcome.SKIPPED, "the baseline saved nothing"))]
    n = sum(r.aspect == saved for r in reports[1].results)
    assert n >= 1
    assert action_outputs(reports, {})["not-judged"] == str(n)
    assert headline(reports).endswith(f"; {n} baseline-judged check{'s' if n > 1 else ''} not judged: the baseline "
                                      f"failed {'them' if n > 1 else 'it'}"), headline(reports)
