"""What a GitHub runner reads back from the files a step writes: GITHUB_OUTPUT's outputs, for the tests that check
what the action and the CLI hand on to later steps."""

from __future__ import annotations


def read_github_output(text: str) -> dict[str, str]:
    """The runner's reading of GITHUB_OUTPUT: `name=value` lines and `name<<DELIMITER` blocks."""
    lines, out, i = text.split("\n"), {}, 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        eq, heredoc = line.find("="), line.find("<<")
        if eq >= 0 and (heredoc < 0 or eq < heredoc):
            out[line[:eq]] = line[eq + 1 :]
            continue
        name, delimiter = line[:heredoc], line[heredoc + 2 :]
        end = lines.index(delimiter, i)
        out[name] = "\n".join(lines[i:end])
        i = end + 1
    return out
