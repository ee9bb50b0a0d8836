"""Bad input is refused with 422 naming the field and the reason, alike on every database.

One test per case: JSON nested too deep in ``config`` and in ``options`` (and deeper than the
parser goes), non-finite numbers, an oversized ``options``, control characters in names, and
numbers or booleans given as another JSON type.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from tessera_api.limits import (
    MAX_CONFIG_BYTES,
    MAX_JOB_OPTIONS_BYTES,
    MAX_JSON_DEPTH,
    MAX_OPTIONS_BYTES,
    MAX_ROW_ID,
)
from tessera_ml.registry import all_specs
from tests.backend.factories import ADMIN, API, PartyRef, create_party, running_job

JSON = {**ADMIN, "Content-Type": "application/json"}


def refused(response: Any, loc: list[str | int]) -> str:
    """The reason a 422 problem gives for ``loc``."""
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    errors = response.json()["errors"]
    found = [e["msg"] for e in errors if e["loc"] == loc]
    assert found, f"no error at {loc}: {errors}"
    return str(found[0])


def nested(depth: int) -> Any:
    """Objects ``depth`` deep: ``{"a": {"a": … 1}}``."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def job(party: PartyRef, **fields: Any) -> dict[str, Any]:
    assignment = {"party": party.name, "role": "trainer", **fields.pop("assignment", {})}
    return {"name": "job", "algorithm": "solo", "assignments": [assignment], **fields}


def split_job(client: TestClient, config: dict[str, Any]) -> Any:
    feature, label = create_party(client), create_party(client)
    body = {
        "name": "split",
        "algorithm": "split",
        "config": config,
        "assignments": [
            {"party": feature.name, "role": "feature"},
            {"party": label.name, "role": "label"},
        ],
    }
    return client.post(f"{API}/jobs", json=body, headers=ADMIN)


def test_config_nested_too_deep_is_refused(client: TestClient) -> None:
    party = create_party(client)
    for depth in (MAX_JSON_DEPTH + 1, 256, 300):
        response = client.post(f"{API}/jobs", json=job(party, config=nested(depth)), headers=ADMIN)
        reason = refused(response, ["body", "config"])
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in reason


def test_options_nested_too_deep_are_refused(client: TestClient) -> None:
    party = create_party(client)
    deep = job(party, assignment={"options": nested(300)})
    response = client.post(f"{API}/jobs", json=deep, headers=ADMIN)
    assert "nested deeper than" in refused(response, ["body", "assignments", 0, "options"])
    # the options object itself is the first level: MAX_JSON_DEPTH levels in all are fine
    at_limit = job(party, assignment={"options": nested(MAX_JSON_DEPTH)})
    accepted = client.post(f"{API}/jobs", json=at_limit, headers=ADMIN)
    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["assignments"][0]["options"] == nested(MAX_JSON_DEPTH)


def test_a_body_nested_deeper_than_the_parser_goes_is_refused(sqlite_client: TestClient) -> None:
    depth = 100_000
    body = '{"name": "job", "algorithm": "solo", "config": ' + "[" * depth + "]" * depth + "}"
    response = sqlite_client.post(f"{API}/jobs", content=body, headers=JSON)
    assert "nested too deeply" in refused(response, ["body"])


def test_non_finite_numbers_in_config_and_options_are_refused(client: TestClient) -> None:
    party = create_party(client)
    assignment = f'{{"party": "{party.name}", "role": "trainer"'
    head = '{"name": "job", "algorithm": "solo", "assignments": ['
    for literal in ("Infinity", "-Infinity", "NaN", "1e999"):
        in_config = f'{head}{assignment}}}], "config": {{"lr": {literal}}}}}'
        response = client.post(f"{API}/jobs", content=in_config, headers=JSON)
        assert "numbers must be finite" in refused(response, ["body", "config", "lr"])
        in_options = f'{head}{assignment}, "options": {{"pace": [1, {literal}]}}}}]}}'
        response = client.post(f"{API}/jobs", content=in_options, headers=JSON)
        loc = ["body", "assignments", 0, "options", "pace", 1]
        assert "numbers must be finite" in refused(response, loc)
        in_capacity = f'{head}{assignment}, "capacity": [{literal}]}}]}}'
        response = client.post(f"{API}/jobs", content=in_capacity, headers=JSON)
        assert "finite" in refused(response, ["body", "assignments", 0, "capacity", 0])


def test_non_finite_metric_values_are_refused(sqlite_client: TestClient) -> None:
    client = sqlite_client
    world = running_job(client)
    body = (
        f'{{"task_id": "{world.alice_task}", "points": '
        '[{"rank": 0, "name": "loss", "step": 1, "value": Infinity}]}'
    )
    headers = {**world.alice.auth, "Content-Type": "application/json"}
    response = client.post(f"{API}/jobs/{world.id}/metrics", content=body, headers=headers)
    assert "finite" in refused(response, ["body", "points", 0, "value"])


def test_options_over_the_size_limit_are_refused(sqlite_client: TestClient) -> None:
    client = sqlite_client
    party = create_party(client)
    blob = {"blob": "x" * 10_000_000}
    response = client.post(
        f"{API}/jobs", json=job(party, assignment={"options": blob}), headers=ADMIN
    )
    reason = refused(response, ["body", "assignments", 0, "options"])
    assert f"over the limit of {MAX_OPTIONS_BYTES}" in reason
    config = {"blob": "x" * MAX_CONFIG_BYTES}
    response = client.post(f"{API}/jobs", json=job(party, config=config), headers=ADMIN)
    assert f"over the limit of {MAX_CONFIG_BYTES}" in refused(response, ["body", "config"])
    # each within its bound, but all of them together over the job's
    others = [create_party(client) for _ in range(4)]
    options = {"blob": "x" * (MAX_OPTIONS_BYTES - 100)}
    body = {
        "name": "job",
        "algorithm": "solo",
        "assignments": [
            {"party": p.name, "role": "trainer", "options": options} for p in [party, *others]
        ],
    }
    response = client.post(f"{API}/jobs", json=body, headers=ADMIN)
    assert f"over the limit of {MAX_JOB_OPTIONS_BYTES}" in refused(
        response, ["body", "assignments"]
    )


def test_control_characters_in_names_are_refused(client: TestClient) -> None:
    party = create_party(client)
    for character in ("\x00", "\x1b", "\n", "\x85"):
        name = f"a{character}b"
        response = client.post(
            f"{API}/parties", json={"name": "p-ctl", "display_name": name}, headers=ADMIN
        )
        assert "control characters" in refused(response, ["body", "display_name"])
        response = client.patch(
            f"{API}/parties/{party.name}", json={"display_name": name}, headers=ADMIN
        )
        assert "control characters" in refused(response, ["body", "display_name"])
        response = client.post(f"{API}/jobs", json={**job(party), "name": name}, headers=ADMIN)
        assert "control characters" in refused(response, ["body", "name"])
        response = client.post(
            f"{API}/jobs",
            json=job(party, assignment={"role": f"trainer{character}"}),
            headers=ADMIN,
        )
        assert "control characters" in refused(response, ["body", "assignments", 0, "role"])
        worker = {"hostname": name, "cpu_count": 1, "memory_bytes": 1}
        response = client.post(f"{API}/workers", json=worker, headers=party.auth)
        assert "control characters" in refused(response, ["body", "hostname"])
        accelerator = {"name": name, "total_memory": 1, "free_memory": 1}
        worker = {"hostname": "h", "cpu_count": 1, "memory_bytes": 1, "accelerators": [accelerator]}
        response = client.post(f"{API}/workers", json=worker, headers=party.auth)
        assert "control characters" in refused(response, ["body", "accelerators", 0, "name"])
        response = client.get(f"{API}/jobs", params={"q": name}, headers=ADMIN)
        assert "control characters" in refused(response, ["query", "q"])
        for path in (f"jobs/{quote(name, safe='')}", f"jobs/{quote(name, safe='')}/events"):
            response = client.get(f"{API}/{path}", headers=ADMIN)
            assert "control characters" in refused(response, ["path", "job_id"])


def test_cursors_beyond_the_row_ids_are_refused(client: TestClient) -> None:
    # PostgreSQL refused to compare a 32-bit id with them: a 422 without a field for the logs,
    # and an event stream broken after its first line
    world = running_job(client)
    beyond = str(MAX_ROW_ID + 1)
    response = client.get(f"{API}/jobs/{world.id}/logs", params={"after": beyond}, headers=ADMIN)
    assert refused(response, ["query", "after"])
    events = f"{API}/jobs/{world.id}/events"
    response = client.get(events, params={"after": beyond, "once": "true"}, headers=ADMIN)
    assert refused(response, ["query", "after"])
    response = client.get(
        events, params={"once": "true"}, headers={**ADMIN, "Last-Event-ID": beyond}
    )
    assert refused(response, ["header", "Last-Event-ID"])
    every = client.get(events, params={"once": "true"}, headers=ADMIN).text
    first, second = [line for line in every.splitlines() if line.startswith("id: ")][:2]
    headers = {**ADMIN, "Last-Event-ID": first.removeprefix("id: ")}
    rest = client.get(events, params={"once": "true"}, headers=headers)
    assert rest.status_code == 200
    assert f"{first}\n" not in rest.text and f"{second}\n" in rest.text


def test_free_text_refuses_nul_only(client: TestClient) -> None:
    response = client.post(
        f"{API}/parties", json={"name": "p-nul", "description": "a\x00b"}, headers=ADMIN
    )
    assert "NUL" in refused(response, ["body", "description"])
    text = "line one\n\tline two \x1b[1mbold\x1b[0m"
    response = client.post(
        f"{API}/parties", json={"name": "p-text", "description": text}, headers=ADMIN
    )
    assert response.status_code == 201, response.text
    assert client.get(f"{API}/parties/p-text", headers=ADMIN).json()["description"] == text
    world = running_job(client)
    lines = {"task_id": world.alice_task, "lines": [{"rank": 0, "message": "a\x00b"}]}
    response = client.post(f"{API}/jobs/{world.id}/logs", json=lines, headers=world.alice.auth)
    assert "NUL" in refused(response, ["body", "lines", 0, "message"])


def test_steps_of_another_json_type_are_refused(sqlite_client: TestClient) -> None:
    for steps in ("100", True, 100.5):
        response = split_job(sqlite_client, {"steps": steps})
        assert response.json()["code"] == "invalid_config"
        assert refused(response, ["body", "config", "steps"])


def test_numbers_are_json_numbers_and_booleans_json_booleans(sqlite_client: TestClient) -> None:
    client = sqlite_client
    # JSON Schema's integer is a number without a fractional part: 100.0 is one
    accepted = split_job(client, {"steps": 100.0, "lr": 1})
    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["config"]["steps"] == 100
    assert refused(split_job(client, {"lr": "0.5"}), ["body", "config", "lr"])
    party = create_party(client)
    response = client.post(f"{API}/jobs", json=job(party, priority="5"), headers=ADMIN)
    assert refused(response, ["body", "priority"])
    response = client.post(
        f"{API}/jobs", json=job(party, assignment={"processes": True}), headers=ADMIN
    )
    assert refused(response, ["body", "assignments", 0, "processes"])
    response = client.patch(f"{API}/parties/{party.name}", json={"disabled": 1}, headers=ADMIN)
    assert refused(response, ["body", "disabled"])
    response = client.post(f"{API}/jobs", json=job(party, priority=5.0), headers=ADMIN)
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("name", sorted(all_specs()))
def test_every_algorithm_refuses_a_string_or_a_boolean_for_a_number(name: str) -> None:
    spec = all_specs()[name]
    number = "steps" if "steps" in spec.config_model.model_fields else "seed"
    for wrong in ("100", True):
        with pytest.raises(ValidationError) as caught:
            spec.parse_config({number: wrong})
        assert [e["loc"] for e in caught.value.errors()] == [(number,)]
    assert spec.parse_config({number: 100.0}).model_dump()[number] == 100


def test_nested_configuration_models_are_strict_too() -> None:
    ddp = all_specs()["ddp"]
    with pytest.raises(ValidationError) as caught:
        ddp.parse_config({"model": {"kind": "mlp", "hidden": ["64"], "batch_norm": 1}})
    locs = {e["loc"] for e in caught.value.errors()}
    assert locs == {("model", "mlp", "hidden", 0), ("model", "mlp", "batch_norm")}
    with pytest.raises(ValidationError):
        all_specs()["param_server"].parse_config({"data": {"num_fields": "3"}})


def test_the_limits_are_in_the_openapi_document(sqlite_client: TestClient) -> None:
    document = sqlite_client.get(f"{API}/openapi.json").json()
    schemas = document["components"]["schemas"]
    text = json.dumps(schemas["JobCreate"]) + json.dumps(schemas["AssignmentIn"])
    assert f"at most {MAX_CONFIG_BYTES} bytes" in text
    assert f"at most {MAX_OPTIONS_BYTES} bytes" in text
    assert "pattern" in schemas["PartyCreate"]["properties"]["display_name"]["anyOf"][0]
