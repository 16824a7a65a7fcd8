"""``value``: ``@dataclass(frozen=True, slots=True)`` that costs nothing at import.

A ``shoal`` call is a new process, and building the frozen values at import was a large
part of its price: ``dataclass`` compiles an ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` from source for every class (about
0.5--1 ms each), and a claim from the shell imported some forty classes to use five
(docs/benchmarks.md, *The CLI's start*). ``value`` makes the same class -- the same
slots, fields (``dataclasses.fields`` and ``replace`` work), ``__match_args__``, frozen
errors, equality, hash, repr and pickling -- but writes only what needs no compiler at
once: ``__eq__``, ``__hash__``, ``__repr__`` and the frozen ``__setattr__`` read the
fields through one ``operator.attrgetter``. The ``__init__`` (the one method whose speed
counts: stores build a value per row) is compiled the first time the class is called, as
``dataclass`` writes it, and replaces itself; until then ``inspect.signature`` of the class
says ``(*args, **kwargs)``.

A class it cannot copy exactly (a base with fields, ``ClassVar``, ``InitVar``, ``KW_ONLY``,
a field with ``init=False``) goes to ``dataclass`` itself. tests/unit/test_values.py holds
each value of the model to what ``dataclass`` makes of the same class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["value"]

T = TypeVar("T")

_MISSING: Any = dataclasses.MISSING
_FIELD: Any = getattr(dataclasses, "_FIELD")  # noqa: B009 -- what ``fields`` looks for
_PARAMS: dict[str, bool] = {
    "init": True, "repr": True, "eq": True, "order": False, "unsafe_hash": False,
    "frozen": True, "match_args": True, "kw_only": False, "slots": True,
    "weakref_slot": False,
}  # fmt: skip
_FALLBACK_WORDS = ("ClassVar", "InitVar", "KW_ONLY")


def _params() -> Any:
    """The ``__dataclass_params__`` ``dataclass(frozen=True, slots=True)`` sets (its
    arguments differ between Python versions: read them from its ``__init__``)."""
    kind: Any = getattr(dataclasses, "_DataclassParams")  # noqa: B009
    code = kind.__init__.__code__
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    return kind(**{name: _PARAMS[name] for name in names})


def _fallback(cls: type) -> bool:
    if any(hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:]):
        return True
    notes = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 -- no inspect
    for name, note in notes.items():
        if (
            not isinstance(note, str)
            or note.startswith(_FALLBACK_WORDS)
            or ("dataclasses." in note)
        ):
            return True
        found = cls.__dict__.get(name)
        if isinstance(found, dataclasses.Field) and (not found.init or found.kw_only is True):
            return True
    return False


def _tuple_of(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A C-speed reader of these fields, always as a tuple (what ``dataclass`` compares
    and hashes)."""
    if len(names) >= 2:
        return attrgetter(*names)
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _value(cls: type[T]) -> type[T]:
    """The class as ``@dataclass(frozen=True, slots=True)`` makes it; see the module."""
    if _fallback(cls):
        return dataclasses.dataclass(frozen=True, slots=True)(cls)
    name = cls.__name__
    fields: dict[str, Any] = {}
    defaulted = ""
    notes = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 -- no inspect
    for field_name, note in notes.items():
        found = cls.__dict__.get(field_name, _MISSING)
        field: Any = (
            found if isinstance(found, dataclasses.Field) else dataclasses.field(default=found)
        )
        if isinstance(found, (list, dict, set)) or (
            field.default is not _MISSING and type(field.default).__hash__ is None
        ):
            raise ValueError(
                f"mutable default {type(field.default)} for field {field_name} is not "
                "allowed: use default_factory"
            )
        if field.default is _MISSING and field.default_factory is _MISSING:
            if defaulted:
                raise TypeError(f"non-default argument {field_name!r} follows default argument")
        else:
            defaulted = field_name
        field.name, field.type = field_name, note
        field._field_type = _FIELD
        if field.kw_only is _MISSING:
            field.kw_only = False
        fields[field_name] = field
    names = list(fields)
    body = {k: v for k, v in cls.__dict__.items() if k not in fields}
    for k in ("__dict__", "__weakref__"):
        body.pop(k, None)
    body["__slots__"] = tuple(names)
    body["__dataclass_fields__"] = fields
    body["__dataclass_params__"] = _params()
    body.setdefault("__match_args__", tuple(names))
    if body.get("__doc__") is None:
        body["__doc__"] = f"{name}({', '.join(names)})"
    meta: Any = type(cls)
    new: Any = meta(name, cls.__bases__, body)
    new.__qualname__ = cls.__qualname__

    compared = _tuple_of([f.name for f in fields.values() if f.compare])
    hashed = _tuple_of(
        [f.name for f in fields.values() if (f.compare if f.hash is None else f.hash)]
    )
    shown = [f.name for f in fields.values() if f.repr]
    frozen_error = dataclasses.FrozenInstanceError

    def __eq__(self: Any, other: object) -> Any:  # noqa: N807
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:  # noqa: N807
        return hash(hashed(self))

    def __repr__(self: Any) -> str:  # noqa: N807
        said = ", ".join(f"{n}={getattr(self, n)!r}" for n in shown)
        return f"{self.__class__.__qualname__}({said})"

    def __setattr__(self: Any, attr: str, value: Any) -> None:  # noqa: N807
        if type(self) is new or attr in fields:
            raise frozen_error(f"cannot assign to field {attr!r}")
        super(new, self).__setattr__(attr, value)

    def __delattr__(self: Any, attr: str) -> None:  # noqa: N807
        if type(self) is new or attr in fields:
            raise frozen_error(f"cannot delete field {attr!r}")
        super(new, self).__delattr__(attr)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        # The first call: compile the real one (it replaces this one) and run it.
        new.__init__ = _compiled_init(new, fields)
        new.__init__(self, *args, **kwargs)

    wrap = getattr(dataclasses, "_recursive_repr", None)
    methods: dict[str, Any] = {
        "__init__": __init__,
        "__repr__": wrap(__repr__) if wrap else __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
        "__getstate__": getattr(dataclasses, "_dataclass_getstate", None),
        "__setstate__": getattr(dataclasses, "_dataclass_setstate", None),
    }
    for method_name, method in methods.items():
        if method is not None and method_name not in cls.__dict__:
            method.__qualname__ = f"{new.__qualname__}.{method_name}"
            setattr(new, method_name, method)
    return new  # type: ignore[no-any-return]


def _compiled_init(cls: Any, fields: dict[str, Any]) -> Any:
    """``__init__`` as ``dataclass`` writes it: each field set through ``object``, a
    ``default_factory`` called when its argument is left out, then ``__post_init__``."""
    factory = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", object())  # shown "<factory>"
    scope: dict[str, Any] = {"__set": object.__setattr__, "__FACTORY": factory}
    params, lines = [], []
    for name, field in fields.items():
        if field.default_factory is not _MISSING:
            scope[f"__factory_{name}"] = field.default_factory
            params.append(f"{name}=__FACTORY")
            lines.append(
                f"  __set(self, {name!r}, __factory_{name}() if {name} is __FACTORY else {name})"
            )
            continue
        if field.default is not _MISSING:
            scope[f"__default_{name}"] = field.default
            params.append(f"{name}=__default_{name}")
        else:
            params.append(name)
        lines.append(f"  __set(self, {name!r}, {name})")
    if hasattr(cls, "__post_init__"):
        lines.append("  self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(lines) or "  pass")
    exec(source, scope)
    init: Any = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {n: f.type for n, f in fields.items()} | {"return": None}
    return init


if TYPE_CHECKING:  # to the type checker, what it is: a frozen dataclass
    from typing_extensions import dataclass_transform

    @dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
    def value(cls: type[T]) -> type[T]: ...

else:
    value = _value
