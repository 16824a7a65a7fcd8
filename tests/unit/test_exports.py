"""The public surface: what ``import shoal`` offers, and how every error ends a command."""

from __future__ import annotations

import importlib
import inspect

import pytest

import shoal
from shoal import errors

PUBLIC_MODULES = [
    "shoal",
    "shoal.clock",
    "shoal.errors",
    "shoal.fleet",
    "shoal.model",
    "shoal.policy",
    "shoal.settings",
    "shoal.testing",
    "shoal.stores",
    "shoal.runtime",
    "shoal.runtime.command",
    "shoal.runtime.hub",
    "shoal.runtime.supervisor",
    "shoal.runtime.worker",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_exported_name_exists(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__, f"{name} declares no public names"
    for exported in module.__all__:
        assert hasattr(module, exported), f"{name}.__all__ lists {exported!r}, which is missing"


def test_the_package_exports_the_api_people_use() -> None:
    for needed in ("Fleet", "Lease", "Task", "Agent", "ManualClock", "ShoalError", "LeaseLost"):
        assert needed in shoal.__all__


def test_every_error_has_a_message_a_code_and_an_exit_code() -> None:
    classes = [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, errors.ShoalError)
    ]
    assert {c.__name__ for c in classes} <= set(errors.__all__)
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes)), "two errors share a machine-readable code"
    for cls in classes:
        assert cls.__doc__ and cls().message == cls.__doc__.strip()
    assert errors.exit_code_for(errors.InvalidPriority()) == 2
    assert errors.exit_code_for(errors.UnknownAgent()) == 2
    assert errors.exit_code_for(errors.LeaseLost()) == 3
    assert errors.exit_code_for(errors.FleetFull()) == 3
    assert errors.exit_code_for(errors.SchemaMismatch()) == 2
    assert errors.exit_code_for(errors.StoreError()) == 2
    assert errors.exit_code_for(errors.StoreUnavailable()) == 4


def test_an_error_carries_its_hint_into_json() -> None:
    err = errors.FleetFull("fleet is full: 4 of 4", hint="raise max_agents")
    assert err.to_dict() == {
        "code": "fleet_full",
        "message": "fleet is full: 4 of 4",
        "hint": "raise max_agents",
    }
    assert "hint: raise max_agents" in str(err)
