"""Runtime dependencies are bounded in pyproject.toml and pinned in requirements.lock.

A lower bound alone lets the next major release in on any fresh install; every runtime dependency needs
an exact pin or an upper bound. The lock pins the whole runtime closure to versions those bounds allow.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([a-z0-9-]+)==([0-9][0-9A-Za-z.+!-]*)$")


def _lock_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock_requirements", ROOT / "scripts" / "lock_requirements.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOCKING = _lock_script()


def _locked() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        found = PIN.match(line)
        assert found, f"requirements.lock: {line!r} is not `name==version` with a normalised name"
        assert found.group(1) not in pins, f"{found.group(1)} is locked twice"
        pins[found.group(1)] = Version(found.group(2))
    return pins


@pytest.mark.parametrize("requirement", LOCKING.runtime_roots(), ids=str)
def test_every_runtime_dependency_is_pinned_or_bounded_above(requirement: Requirement) -> None:
    operators = {specifier.operator for specifier in requirement.specifier}
    assert operators & {"==", "===", "~=", "<", "<="}, (
        f"{requirement}: add an upper bound (the next major version), e.g. {requirement.name}>=X,<NEXT_MAJOR"
    )
    assert operators & {"==", "===", "~=", ">", ">="}, f"{requirement}: add a lower bound"


def test_the_lock_pins_every_runtime_dependency_within_its_bounds() -> None:
    locked = _locked()
    for requirement in LOCKING.runtime_roots():
        name = LOCKING.canonical(requirement.name)
        assert name in locked, f"{name} is a runtime dependency but not in requirements.lock"
        assert requirement.specifier.contains(locked[name]), f"{name}=={locked[name]} is outside {requirement}"


def test_the_lock_covers_the_runtime_closure_and_nothing_else() -> None:
    # Names from the installed distributions' metadata: a new upstream release that adds a dependency
    # shows here, and the lock is regenerated (scripts/lock_requirements.py).
    installed = LOCKING.runtime_closure(LOCKING.runtime_roots())
    assert set(_locked()) == set(installed)


def test_the_lock_is_sorted_and_regenerable() -> None:
    names = list(_locked())
    assert names == sorted(names)
    text = LOCKING.render_lock({name: str(version) for name, version in _locked().items()})
    assert text == (ROOT / "requirements.lock").read_text(encoding="utf-8")
