"""Run inside the environment under test (`python -m torch_upgrade_check.aspects.api.apinames`, started as the worker
is): for each dotted torch name on stdin, whether it exists here, its parameters, and whether reaching it warns;
JSON in, JSON out (`kind` and `schema_version`: schema.API_NAMES_KIND, checked on both ends).

A name is reached as the team's code reaches it: `getattr` segment by segment from `torch`, importing
`torch.a.b` as a module where the attribute is not there yet (a submodule not imported). Only warnings raised
while reaching the name are kept (torch's own import warnings are not), DeprecationWarning and FutureWarning
among them. Each name is answered on its own: one that raises records the error and the rest go on.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import warnings

_MISSING = object()


def _step(obj: object, prefix: str, part: str) -> object:
    found = getattr(obj, part, _MISSING)
    if found is _MISSING and inspect.ismodule(obj):
        try:
            found = importlib.import_module(f"{prefix}.{part}")
        except ImportError:
            found = _MISSING
    return found


def _parameters(obj: object) -> list[str] | None:
    if not callable(obj):
        return None
    try:
        return list(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return None


def answer(torch: object, name: str) -> dict[str, object]:
    parts = name.split(".")
    obj, prefix = torch, parts[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for part in parts[1:]:
                obj = _step(obj, prefix, part)
                if obj is _MISSING:
                    return {"exists": False, "missing": f"{prefix}.{part}", "warns": _warned(caught)}
                prefix = f"{prefix}.{part}"
        except Exception as e:  # a name whose access raises is answered with the error, not lost
            line = next((x.strip() for x in str(e).splitlines() if x.strip()), "")
            return {"exists": False, "missing": prefix, "error": f"{type(e).__name__}: {line}"[:300],
                    "warns": _warned(caught)}
    return {"exists": True, "parameters": _parameters(obj), "warns": _warned(caught)}


def _warned(caught: list[warnings.WarningMessage]) -> list[str]:
    return sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:200] if str(w.message) else ''}"
                   for w in caught if issubclass(w.category, (DeprecationWarning, FutureWarning))})


def main() -> None:
    from torch_upgrade_check.schema import API_NAMES_KIND as KIND
    from torch_upgrade_check.schema import API_NAMES_VERSION as SCHEMA_VERSION

    asked = json.load(sys.stdin)
    if asked.get("kind") != KIND or asked.get("schema_version") != SCHEMA_VERSION:
        raise SystemExit(f"apinames: expected {KIND} version {SCHEMA_VERSION}, got {asked.get('kind')!r} "
                         f"version {asked.get('schema_version')!r}")
    import torch

    names = {name: answer(torch, name) for name in asked["names"]}
    json.dump({"kind": KIND, "schema_version": SCHEMA_VERSION, "torch": str(torch.__version__), "names": names},
              sys.stdout)


if __name__ == "__main__":
    main()
