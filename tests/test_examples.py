"""Every example is accepted everywhere; every invalid example is refused with its intended message."""

from pathlib import Path

import jsonschema
import pytest
import yaml

from frontier_operator.api import SpecInvalid, load_target_file
from frontier_operator.validation import check_target
from schema_tools import ROOT, cel_failures, openapi_schema

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
INVALID = sorted((ROOT / "examples" / "invalid").glob("*.yaml"))


def header(path: Path, key: str) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"# {key}: "):
            return line.split(": ", 1)[1]
    raise AssertionError(f"{path.name} has no '# {key}:' line")


def schema_errors(document: object) -> list[str]:
    return [error.message for error in jsonschema.Draft7Validator(openapi_schema()).iter_errors(document)]


def test_the_five_scenarios_are_there() -> None:
    assert {path.stem for path in EXAMPLES} >= {
        "glm5-agentic-coding",
        "kimi-k25-batch",
        "deepseek-r1-low-latency",
        "llama-70b-chat",
        "qwen3-32b-disagg",
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_are_valid_for_the_api_server_and_the_operator(path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert path.read_text(encoding="utf-8").startswith("#"), "each example starts with a comment header"
    assert schema_errors(document) == []
    assert cel_failures(openapi_schema(), document) == []
    target = check_target(load_target_file(path))
    assert target.metadata["name"] == path.stem


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_examples_are_refused_with_their_message(path: Path) -> None:
    expected, refused_by = header(path, "expect"), header(path, "refused-by")
    with pytest.raises(SpecInvalid) as caught:
        check_target(load_target_file(path))
    messages = [str(error) for error in caught.value.errors]
    assert any(message.startswith(expected) for message in messages), messages

    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    if refused_by == "schema":
        assert schema_errors(document), "the CRD schema should refuse this at kubectl apply"
    elif refused_by == "cel":
        assert cel_failures(openapi_schema(), document), "a CEL rule should refuse this at kubectl apply"
    else:
        assert refused_by == "operator", refused_by
