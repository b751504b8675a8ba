"""YAML output that means the same to every reader: strings that look like booleans, nulls or numbers are quoted.

PyYAML already quotes what *it* would read back as another type, but YAML 1.1 readers (kubectl's
and Helm's among them) also take `y`, `n`, `on`, `off`, `yes` and `no` for booleans; a label value
`"on"` written bare would become `true` there. Keys keep the order the renderer built them in, so
the output is byte-identical from run to run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

# YAML 1.1 boolean spellings (https://yaml.org/type/bool.html), compared case-insensitively.
_YAML11_BOOLS = frozenset({"y", "yes", "n", "no", "true", "false", "on", "off"})
# Numbers in YAML 1.2's core schema that PyYAML (YAML 1.1) reads as strings, e.g. `1e3` (Go's YAML reads
# it as a float), plus hexadecimal and octal forms.
_NUMBER_LIKE = re.compile(r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$|^0[xXoObB][0-9a-fA-F_]+$")


class _QuotingDumper(yaml.SafeDumper):
    # Anchors and aliases (`&id001`) are legal YAML but unreadable in a diff; repeat the value instead.
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    implicit_tag: str = dumper.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    if value.lower() in _YAML11_BOOLS or _NUMBER_LIKE.match(value) or implicit_tag != "tag:yaml.org,2002:str":
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_QuotingDumper.add_representer(str, _represent_str)


def dump(document: Mapping[str, Any]) -> str:
    return yaml.dump(
        document, Dumper=_QuotingDumper, sort_keys=False, default_flow_style=False, width=100_000, allow_unicode=True
    )


def dump_all(documents: Iterable[Mapping[str, Any]]) -> str:
    """A multi-document stream, each document introduced by `---`."""
    return "".join(f"---\n{dump(document)}" for document in documents)
