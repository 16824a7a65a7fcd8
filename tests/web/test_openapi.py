"""schemathesis against the API's own OpenAPI document: random requests for every route,
built from the document's schemas (valid and invalid), and not one answer may be a server
error or break the document's promises."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.schemas import BaseSchema
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from shoal import Fleet
from shoal.faces.exposure import Exposure, allowed_hosts
from shoal.faces.web import create_app
from tests.web.dash_support import OWNER, OWNER_HEADERS

#: What every answer must honour. Not "valid by the document is accepted": a priority
#: "soon" or a title holding NUL fits the document's types, but the Fleet is the judge of
#: what is valid, and a 400 that says why is the right answer.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

#: Requests drawn per operation (`make fuzz` raises it with FUZZ_EXAMPLES).
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10"))


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> BaseSchema:
    folder: Path = tmp_path_factory.mktemp("openapi")
    fleet = Fleet.open(f"sqlite://{folder / 'fleet.db'}", create=True)
    fleet.register("ann", skills="py")
    for n in range(3):
        fleet.post(f"task {n}", skills="py")
    fleet.claim("ann")
    # schemathesis's ASGI client names its host "testserver".
    exposure = Exposure("127.0.0.1", 8765, None, allowed_hosts("127.0.0.1", ["testserver"]))
    app = create_app(fleet, exposure, local_secret=OWNER)
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)
    # A 400 from the Fleet for a request the document's types allow is right (see CHECKS).
    schema.config.checks.positive_data_acceptance.enabled = False
    return schema


def _labels() -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        fleet = Fleet.open(f"sqlite://{folder}/fleet.db", create=True)
        document = create_app(fleet, Exposure("127.0.0.1", 1, None, ())).openapi()
        fleet.close()
    return [f"{method.upper()} {path}" for path, ops in document["paths"].items() for method in ops]


@pytest.mark.parametrize("label", _labels())
def test_no_request_makes_the_api_fail(api_schema: BaseSchema, label: str) -> None:
    operation = api_schema.find_operation_by_label(label)
    assert operation is not None

    @given(data=st.data())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    def check(data: st.DataObject) -> None:
        case = data.draw(operation.as_strategy())
        response = case.call(headers=OWNER_HEADERS)  # the owner of the open fleet
        assert response.status_code < 500, (label, case.body, case.query, response.text)
        case.validate_response(response)

    check()


def test_the_document_names_every_verb(api_schema: BaseSchema) -> None:
    paths = set(api_schema.raw_schema["paths"])
    for route in ("/api/v1/tasks", "/api/v1/agents/{agent_id}/claim", "/api/v1/events"):
        assert route in paths


def test_the_document_says_a_repeated_key_answers_200(api_schema: BaseSchema) -> None:
    """A post whose key was posted before answers 200 with the first task: documented, so
    a client generated from the document expects it (schemathesis found it missing)."""
    responses = api_schema.raw_schema["paths"]["/api/v1/tasks"]["post"]["responses"]
    assert {"200", "201"} <= set(responses)
