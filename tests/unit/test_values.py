"""``shoal._values.value`` makes what ``@dataclass(frozen=True, slots=True)`` makes, without
compiling anything at import: each model value is held here to the dataclass of the same
class body, built beside it -- fields, defaults, equality, hash, repr, the frozen errors,
``replace``, ``asdict``, pickling and copying."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import field
from typing import Any

import pytest

from shoal import _recurring, _reports, model, policy, policy_why, settings
from shoal._values import value

#: Every class the CLI's start builds with ``value`` (not through a fallback).
VALUES = [
    getattr(module, name)
    for module in (model, _reports, _recurring, settings, policy, policy_why)
    for name in dir(module)
    if isinstance(getattr(module, name), type)
    and getattr(module, name).__module__ == module.__name__
    and hasattr(getattr(module, name), "__dataclass_fields__")
]


class Plain:
    """A value with every kind of field the model uses."""

    a: int
    b: str = "x"
    c: tuple[str, ...] = ()
    d: Any = field(default_factory=dict)
    e: int = field(default=3, compare=False, repr=False)

    @property
    def twice(self) -> int:
        return self.a * 2


Made: Any = value(type("Made", (), dict(Plain.__dict__)))
Made.__module__, Made.__qualname__ = __name__, "Made"
Real: Any = dataclasses.dataclass(frozen=True, slots=True)(type("Real", (), dict(Plain.__dict__)))
Real.__module__, Real.__qualname__ = __name__, "Real"


def outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except Exception as exc:  # what was raised is what is compared
        return (type(exc).__name__, str(exc).replace("Made", "C").replace("Real", "C"))


def behaviour(cls: Any) -> list[Any]:
    x = cls(1, "y", d={"k": 1})
    y = cls(1, "y", d={"k": 1}, e=9)
    return [
        repr(x).replace(cls.__name__, "C"),
        x == y,
        x != cls(2),
        x == (1, "y"),
        outcome(lambda: hash(x)),
        hash(cls(1, d=("k",))) == hash(cls(1, d=("k",), e=4)),
        x.twice,
        cls.__slots__,
        cls.__match_args__,
        [(f.name, f.type, f.default, f.compare, f.repr, f.hash, f.init, f.kw_only)
         for f in dataclasses.fields(cls)],
        repr(dataclasses.replace(x, a=5)).replace(cls.__name__, "C"),
        dataclasses.asdict(x),
        dataclasses.astuple(x),
        dataclasses.is_dataclass(cls),
        outcome(lambda: setattr(x, "a", 3)),
        outcome(lambda: delattr(x, "a")),
        outcome(lambda: setattr(x, "other", 3))[0] != "ok",  # (3.11's dataclass: TypeError)
        pickle.loads(pickle.dumps(x)) == x,
        copy.copy(x) == x,
        copy.deepcopy(x) == x,
        outcome(cls),
        outcome(lambda: cls(1, 2, 3, 4, 5, 6)),
        outcome(lambda: cls(1, zz=2)),
        hasattr(x, "__dict__"),
        cls(1).d is not cls(1).d,
        str(inspect.signature(cls)).replace("<factory>", "F"),  # after a first call
        cls.__dataclass_params__.frozen,
    ]  # fmt: skip


def test_value_behaves_as_a_frozen_slotted_dataclass() -> None:
    assert behaviour(Made) == behaviour(Real)


@pytest.mark.parametrize("cls", VALUES, ids=lambda c: c.__name__)
def test_each_model_value_is_its_dataclass(cls: Any) -> None:
    """The value as shoal builds it against a dataclass of its class body: same fields,
    same signature, same ``repr``, ``==`` and ``hash`` for a value made of its defaults."""
    assert cls.__slots__ == tuple(f.name for f in dataclasses.fields(cls))
    body = {k: v for k, v in cls.__dict__.items() if k not in ("__slots__",)}
    fields = cls.__dataclass_fields__
    for name, f in fields.items():
        body.pop(name, None)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            body[name] = f
    for key in [k for k in body if k.startswith("__dataclass") or k in (
            "__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__",
            "__getstate__", "__setstate__", "__match_args__")]:  # fmt: skip
        del body[key]
    real: Any = dataclasses.dataclass(frozen=True, slots=True)(
        type(cls.__name__, cls.__bases__, body)
    )
    assert list(real.__dataclass_fields__) == list(fields)
    assert [(f.default, f.compare, f.repr, f.hash) for f in dataclasses.fields(real)] == [
        (f.default, f.compare, f.repr, f.hash) for f in dataclasses.fields(cls)
    ]
    assert real.__match_args__ == cls.__match_args__
    missing = dataclasses.MISSING
    required = [
        n for n, f in fields.items() if f.default is missing and f.default_factory is missing
    ]
    args = {n: i for i, n in enumerate(required)}
    made, built = outcome(lambda: cls(**args)), outcome(lambda: real(**args))
    # (before its first call, the signature is the stand-in's: ``*args, **kwargs``)
    assert str(inspect.signature(real)) == str(inspect.signature(cls))
    assert made[0] == built[0]  # both made, or both refused (a __post_init__ check)
    if made[0] != "ok":
        return
    ours, theirs = made[1], built[1]
    assert repr(ours).replace(cls.__qualname__, "C") == repr(theirs).replace(real.__qualname__, "C")
    assert ours == cls(**args)
    assert outcome(lambda: hash(ours)) == outcome(lambda: hash(theirs))
    assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(ours, next(iter(fields)), None)


def test_a_class_it_cannot_copy_is_a_dataclass() -> None:
    @value
    class Base:
        a: int = 0

    @value
    class Child(Base):
        b: int = 1

    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b"]
    assert Child(2, 3) == Child(2, 3) and "__dataclass_fields__" in Child.__dict__


def test_a_mutable_default_is_refused_as_dataclass_refuses_it() -> None:
    class Bad:
        items: list[int] = []  # noqa: RUF012

    with pytest.raises(ValueError, match="mutable default"):
        value(Bad)
