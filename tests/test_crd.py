"""The generated CRD: in sync with the models, structural, documented, and its CEL rules compile."""

import re

import pytest

from frontier_operator.crdgen import CRD_FILE, render_crd
from schema_tools import CRD_PATH, ROOT, cel_failures, crd, openapi_schema, walk_schema

INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def test_the_committed_crd_is_what_the_models_generate() -> None:
    assert CRD_PATH == ROOT / CRD_FILE
    assert CRD_PATH.read_text(encoding="utf-8") == render_crd(), "run `make crds`"


def test_identity_names_and_subresources() -> None:
    spec = crd()["spec"]
    assert crd()["metadata"]["name"] == "frontiertargets.frontier.dev"
    assert spec["group"] == "frontier.dev"
    assert spec["names"]["kind"] == "FrontierTarget"
    assert spec["names"]["shortNames"] == ["ft"]
    assert "frontier" in spec["names"]["categories"]
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


def test_printer_columns_answer_slo_cost_and_config_first() -> None:
    columns = crd()["spec"]["versions"][0]["additionalPrinterColumns"]
    names = [column["name"] for column in columns if "priority" not in column]
    assert names[:5] == ["SLO Met", "TPOT", "TTFT", "$/Mtok", "Config"]
    assert {column["name"] for column in columns if column.get("priority") == 1} >= {"GPUs", "Mode"}
    schema = openapi_schema()
    for column in columns:
        if column["jsonPath"].startswith(".metadata."):
            continue
        parts = [p for p in re.sub(r"\[.*?\]", "", column["jsonPath"]).split(".") if p]
        node = schema
        for part in parts:
            assert part in node.get("properties", {}), f"{column['jsonPath']} is not in the schema"
            node = node["properties"][part]
            node = node.get("items", node)


@pytest.mark.parametrize("part", ["spec", "status"])
def test_every_field_has_a_type_and_a_description(part: str) -> None:
    for path, node in walk_schema(openapi_schema()["properties"][part], part):
        if path.endswith(("[]", "{}")):
            continue  # list items and map values are explained by their field
        assert node.get("description"), f"{path} has no description (kubectl explain would be empty)"
        typed = (
            "type" in node or node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        )
        assert typed, f"{path} has no type"


def test_the_schema_is_structural() -> None:
    for path, node in walk_schema(openapi_schema()):
        if path == ".metadata":
            continue  # the API server owns the metadata schema
        assert "$ref" not in node and "title" not in node and "default" not in node, path
        for junctor in ("anyOf", "oneOf", "allOf"):
            if junctor in node:
                assert node.get("x-kubernetes-int-or-string") and node[junctor] == INT_OR_STRING, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("type") == "object" and "properties" not in node and "additionalProperties" not in node:
            assert node.get("x-kubernetes-preserve-unknown-fields"), path


def test_only_the_free_form_config_json_preserves_unknown_fields() -> None:
    preserving = [
        path for path, node in walk_schema(openapi_schema()) if node.get("x-kubernetes-preserve-unknown-fields")
    ]
    assert preserving == [".spec.model.config.inline"]


def test_cel_rules_compile_and_pass_on_an_empty_object() -> None:
    rules = [(path, node) for path, node in walk_schema(openapi_schema()) if "x-kubernetes-validations" in node]
    assert len(rules) >= 5
    for path, node in rules:
        if path.endswith(".slo") or path.endswith("ttft") or path.endswith("tpot") or path.endswith("itl"):
            continue  # these rules demand content
        if path.endswith(".hardware"):
            assert cel_failures(node, {"pools": []}) == []
        else:
            assert cel_failures(node, {}) == [], path
