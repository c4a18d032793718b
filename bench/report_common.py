"""Helpers shared by bench/report.py and its section modules: the repository root, the "n/a"
placeholder, a scenario lookup and number formatting. No state.
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NA = "n/a"


def scen(part, name):
    """The scenario `name` of a tool's results, or None."""
    if not isinstance(part, dict):
        return None
    s = (part.get("scenarios") or {}).get(name)
    return s if isinstance(s, dict) and "skipped" not in s else None


def f(x, digits=2):
    return NA if x is None else f"{x:,.{digits}f}"
