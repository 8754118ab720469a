"""`history --html`: the static page as headless Chromium renders it (every chart decoded, a timeline per check)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from history_cases import history_records

from torch_upgrade_check import cli
from torch_upgrade_check.history import store
from torch_upgrade_check.model import Outcome

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The page is read back after Chromium ran it: each image's decoded width, each section's timeline cells
PROBE = """<script>
window.addEventListener('load', () => {
  const out = document.createElement('pre'); out.id = 'probe';
  out.textContent = [...document.querySelectorAll('section.check')].map(s =>
    s.dataset.check + ' img=' + (s.querySelector('img') ? s.querySelector('img').naturalWidth : -1) +
    ' cells=' + s.querySelectorAll('.timeline .run').length +
    ' bad=' + s.querySelectorAll('.timeline .run.bad').length).join('\\n');
  document.body.appendChild(out);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: apt-get install chromium (scripts/test.sh "
                                             "installs it where it can)")
def test_the_page_renders_in_headless_chromium_with_a_chart_and_timeline_per_check(tmp_path: Path) -> None:
    outcomes = [Outcome.PASSED] * 10 + [Outcome.FAILED, Outcome.FAILED]
    for r in history_records([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.18, 1.19], outcomes=outcomes):
        store.append(tmp_path / "store", r)
    assert cli.main(["history", "--store", str(tmp_path / "store"), "--html", str(tmp_path / "page")]) == 0
    index = (tmp_path / "page" / "index.html").read_text()
    probe = tmp_path / "page" / "probe.html"  # beside index.html, so the charts load as the page's own do
    probe.write_text(index.replace("</body>", PROBE + "</body>"))
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                           "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"the probe did not run: {proc.stdout[-1500:]}"
    rows = sorted(found[1].strip().splitlines())
    assert rows == ["mlp[float32]/correctness img=480 cells=12 bad=2", "mlp[float32]/latency img=480 cells=12 bad=0"]
    assert "mlp[float32]/latency: latency 1.18x since nightly 2026-11-11 (last good nightly 2026-11-10)" in proc.stdout
