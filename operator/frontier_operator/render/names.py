"""Deterministic object names, label values, and the revision hash of an engine configuration.

Names are a pure function of the target name, the revision and the role, so rendering twice gives the
same objects and two revisions of one target (stable and canary) never collide.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

# A LeaderWorkerSet names its pods `<name>-<group>-<worker>` and uses them as host names (63
# characters at most), so workload names keep room for two indices of up to four digits each.
MAX_OBJECT_NAME = 52
MAX_LABEL_VALUE = 63
REVISION_LENGTH = 8


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def shorten(value: str, limit: int) -> str:
    """`value` if it fits, else a prefix plus a hash of the whole, so distinct long values stay distinct."""
    if len(value) <= limit:
        return value
    return f"{value[: limit - 9].rstrip('-.')}-{_digest(value, 8)}"


def _dns_label(name: str) -> str:
    # Target names are DNS subdomains (dots allowed, digit first allowed); Services and pod host names
    # are DNS-1035 labels: no dots, a letter first.
    label = name.replace(".", "-")
    return label if label[:1].isalpha() else f"ft-{label}"


def object_name(target: str, *parts: str) -> str:
    """`<target>-<part>-…`, the target part shortened so that the whole fits MAX_OBJECT_NAME."""
    suffix = "".join(f"-{part}" for part in parts)
    return shorten(_dns_label(target), MAX_OBJECT_NAME - len(suffix)) + suffix


def service_name(target: str) -> str:
    """The target's own Service: `<target>` as a DNS-1035 label."""
    return shorten(_dns_label(target), MAX_LABEL_VALUE)


def label_value(value: str) -> str:
    return shorten(value, MAX_LABEL_VALUE)


def revision_hash(image: str, engine_argv: Mapping[str, Sequence[str]], *, sweep: bool = False) -> str:
    """Hash of what makes an engine pod what it is: the image and each role's argv.

    Replica counts are left out on purpose: scaling is not a new revision. Environment and resources are
    left out too; changing them rolls the pods of the same revision in place. A sweep deployment of the very
    configuration that serves gets a revision of its own (`sweep`), so its objects, labels and the router's
    discovery selectors never meet the serving revision's.
    """
    content: dict[str, object] = {"image": image, "roles": {role: list(argv) for role, argv in engine_argv.items()}}
    if sweep:
        content["sweep"] = True
    payload = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return _digest(payload, REVISION_LENGTH)
