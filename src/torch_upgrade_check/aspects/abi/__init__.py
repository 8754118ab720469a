"""The abi aspect: every shared object of each side's environment that links torch, read on the host (host.py,
host_macho.py for macOS) for the torch symbols it needs, judged against what the side's torch exports (judge.py),
shown in the summary (render.py)."""
