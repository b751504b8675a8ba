"""Write requirements.lock: every distribution the operator needs at run time, pinned to the version in the
project venv. The roots are `[project].dependencies` of pyproject.toml; the rest is their dependency
closure (extras not requested are left out), read from the installed distributions' metadata.

    .venv/bin/python scripts/lock_requirements.py            # rewrite requirements.lock
    .venv/bin/python scripts/lock_requirements.py --check    # exit 1 if it is out of date

Install exactly these with `pip install -c requirements.lock -e .` (a constraints file: it pins what the
project asks for and installs nothing else). tests/hardening/test_dependencies.py checks the lock.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
HEADER = """\
# Runtime dependencies of frontier-operator, pinned: the dependency closure of pyproject.toml's
# [project].dependencies as installed in the project venv. Regenerate with
#   .venv/bin/python scripts/lock_requirements.py
# and install with `pip install -c requirements.lock -e .` (tests/hardening/test_dependencies.py checks it).
"""


def canonical(name: str) -> str:
    """PEP 503 normalised name: `PyYAML`, `pyyaml` and `py_yaml` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_roots(pyproject: Path = ROOT / "pyproject.toml") -> list[Requirement]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    return [Requirement(text) for text in project["dependencies"]]


def runtime_closure(roots: list[Requirement]) -> dict[str, str]:
    """Canonical name → installed version of every distribution the roots need (no optional extras)."""
    found: dict[str, str] = {}
    pending = [(root, frozenset(root.extras)) for root in roots]
    while pending:
        requirement, extras = pending.pop()
        if requirement.marker is not None and not any(
            requirement.marker.evaluate({"extra": extra}) for extra in (extras or {""})
        ):
            continue
        name = canonical(requirement.name)
        if name in found:
            continue
        distribution = metadata.distribution(requirement.name)
        found[name] = distribution.version
        pending += [(Requirement(text), frozenset(requirement.extras)) for text in distribution.requires or []]
    return found


def render_lock(closure: dict[str, str]) -> str:
    return HEADER + "".join(f"{name}=={version}\n" for name, version in sorted(closure.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if requirements.lock is out of date")
    args = parser.parse_args(argv)
    text = render_lock(runtime_closure(runtime_roots()))
    if args.check:
        current = LOCK.read_text(encoding="utf-8") if LOCK.exists() else ""
        if current != text:
            print("requirements.lock is out of date: run scripts/lock_requirements.py", file=sys.stderr)
            return 1
        return 0
    LOCK.write_text(text, encoding="utf-8")
    print(f"wrote {LOCK.relative_to(ROOT)}: {text.count('==')} distributions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
