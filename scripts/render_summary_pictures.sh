#!/usr/bin/env bash
# Render the job summary as GitHub shows it, for the README: a failing and a passing summary from the golden
# files (which tests/report/regen_golden.py writes from the renderer, and a test keeps current), converted by
# cmark-gfm (GitHub's own Markdown library, with GitHub's extensions) and screenshotted by headless Chromium.
#
#   scripts/render_summary_pictures.sh            # writes docs/img/summary-failing.png and summary-passing.png
#
# Needs cmark-gfm and chromium on PATH, and a colour emoji font (Debian/Ubuntu: apt-get install cmark-gfm chromium
# fonts-noto-color-emoji). The page style is a
# small stand-in for GitHub's: the pictures show the structure and the text, not GitHub's exact pixels.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
golden="$root/tests/report/golden"
out="$root/docs/img"
for tool in cmark-gfm chromium; do
  command -v "$tool" >/dev/null 2>&1 || { echo "render_summary_pictures: $tool not found; install it (apt-get install $tool)" >&2; exit 2; }
done
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

render() {  # render CASE NAME HEIGHT
  local page="$work/$2.html"
  {
    cat <<'HTML'
<!doctype html><html><head><meta charset="utf-8"><style>
body { font-family: -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; font-size: 14px;
       line-height: 1.5; color: #1f2328; background: #fff; margin: 0; padding: 24px 32px; width: 1216px; }
h2 { font-size: 1.5em; border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; }
h3 { font-size: 1.25em; } h4 { font-size: 1em; } h5 { font-size: .875em; }
table { border-collapse: collapse; display: block; overflow: auto; margin: 0 0 16px; }
th, td { border: 1px solid #d1d9e0; padding: 6px 13px; } th { font-weight: 600; } tr:nth-child(2n) { background: #f6f8fa; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 85%; }
pre { background: #f6f8fa; padding: 16px; border-radius: 6px; overflow: auto; }
blockquote { color: #59636e; border-left: .25em solid #d1d9e0; margin: 0; padding: 0 1em; }
summary { cursor: pointer; }
</style></head><body>
HTML
    cmark-gfm --unsafe --extension table --extension strikethrough --extension autolink --extension tagfilter \
      "$golden/$1/summary.md"
    echo '</body></html>'
  } > "$page"
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --window-size="1280,$3" --screenshot="$out/$2.png" "file://$page" >/dev/null 2>&1
  # what the picture shows: tests/report/test_summary_pictures.py fails when the golden file changes without it
  printf '%s  tests/report/golden/%s/summary.md\n' "$(sha256sum < "$golden/$1/summary.md" | cut -d' ' -f1)" "$1" \
    > "$out/$2.source"
  echo "wrote docs/img/$2.png (from tests/report/golden/$1/summary.md)"
}

render comparison_regression summary-failing 1420
render comparison_clean summary-passing 320
