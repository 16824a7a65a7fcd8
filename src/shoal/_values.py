"""``value``: ``@dataclass(frozen=True, slots=True)`` that costs nothing at import.

A ``shoal`` call is a new process, and building the frozen values at import was a large
part of its price: ``dataclass`` compiles an ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` from source for every class (about
0.5--1 ms each), and a claim from the shell imported some forty classes to use five; and
importing ``dataclasses`` itself loads ``inspect`` (docs/benchmarks.md, *The CLI's start*).

``value`` makes the same class -- the same slots, fields (``dataclasses.fields``,
``replace`` and ``asdict`` work), ``__match_args__``, frozen errors, equality, hash, repr
and pickling -- and compiles nothing at once: ``__eq__``, ``__hash__``, ``__repr__`` and
the frozen ``__setattr__`` read the fields through one ``operator.attrgetter``; the
``__init__`` (the one method whose speed counts: stores build a value per row) is
compiled the first time the class is called, as ``dataclass`` writes it, and replaces
itself (until then ``inspect.signature`` of the class says ``(*args, **kwargs)``); and
``dataclasses`` is imported only when something asks for the ``Field`` objects
(``__dataclass_fields__``) or a frozen field is assigned. ``field`` and ``replace`` are
``dataclasses.field`` and ``dataclasses.replace`` for these classes, without that import.

A class it cannot copy exactly (a base with fields, ``ClassVar``, ``InitVar``, ``KW_ONLY``,
a field with ``init=False`` or ``kw_only``) goes to ``dataclass`` itself.
tests/unit/test_values.py holds each value of the model to what ``dataclass`` makes of
the same class.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["field", "field_names", "replace", "value"]

T = TypeVar("T")

_FALLBACK_WORDS = ("ClassVar", "InitVar", "KW_ONLY")
_PARAMS: dict[str, bool] = {
    "init": True, "repr": True, "eq": True, "order": False, "unsafe_hash": False,
    "frozen": True, "match_args": True, "kw_only": False, "slots": True,
    "weakref_slot": False,
}  # fmt: skip


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"  # as a signature shows a default_factory


_MISSING: Any = _Missing()
_FACTORY: Any = _Factory()
#: Each class ``value`` made, and its fields' names (``replace`` reads it).
_NAMES: dict[type, tuple[str, ...]] = {}


class _Spec:
    """A field as ``field`` gives it (or a plain default), before it is a ``Field``."""

    __slots__ = ("compare", "default", "default_factory", "hash", "init", "kw_only",
                 "metadata", "name", "repr", "type")  # fmt: skip

    def __init__(
        self,
        default: Any = _MISSING,
        default_factory: Any = _MISSING,
        init: bool = True,
        repr: bool = True,
        hash: bool | None = None,
        compare: bool = True,
        metadata: Mapping[Any, Any] | None = None,
        kw_only: Any = _MISSING,
    ) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.default, self.default_factory, self.init, self.repr = (
            default,
            default_factory,
            init,
            repr,
        )
        self.hash, self.compare, self.metadata, self.kw_only = hash, compare, metadata, kw_only
        self.name, self.type = "", ""

    def real(self) -> Any:
        """As ``dataclasses.Field`` (what ``dataclasses.fields`` returns)."""
        import dataclasses

        missing = dataclasses.MISSING
        given: dict[str, Any] = {
            "default": missing if self.default is _MISSING else self.default,
            "default_factory": missing
            if self.default_factory is _MISSING
            else self.default_factory,
            "init": self.init,
            "repr": self.repr,
            "hash": self.hash,
            "compare": self.compare,
            "metadata": self.metadata,
            "kw_only": missing if self.kw_only is _MISSING else self.kw_only,
        }
        made: Any = dataclasses.field(**given)
        made.name, made.type = self.name, self.type
        made._field_type = getattr(dataclasses, "_FIELD")  # noqa: B009 -- what fields() reads
        if self.kw_only is _MISSING:
            made.kw_only = False
        return made


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | Any = _MISSING,
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    metadata: Mapping[Any, Any] | None = None,
    kw_only: Any = _MISSING,
) -> Any:
    """``dataclasses.field``, for a ``value`` (without importing dataclasses)."""
    return _Spec(default, default_factory, init, repr, hash, compare, metadata, kw_only)


class _Lazy:
    """A class attribute computed when first read (then set on the class in its place):
    ``__dataclass_fields__`` and ``__dataclass_params__``, which need ``dataclasses``."""

    def __init__(self, name: str, make: Callable[[], Any]) -> None:
        self.name, self.make = name, make
        self.owner: Any = None

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        made = self.make()
        setattr(self.owner, self.name, made)
        return made


def _params() -> Any:
    """The ``__dataclass_params__`` ``dataclass(frozen=True, slots=True)`` sets (its
    arguments differ between Python versions: read them from its ``__init__``)."""
    import dataclasses

    kind: Any = getattr(dataclasses, "_DataclassParams")  # noqa: B009
    code = kind.__init__.__code__
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    return kind(**{name: _PARAMS[name] for name in names})


def _fallback(cls: type) -> bool:
    if cls.__bases__ != (object,) and any(
        hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:]
    ):
        return True
    notes = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 -- no inspect
    for name, note in notes.items():
        if not isinstance(note, str) or note.startswith(_FALLBACK_WORDS) or "dataclasses." in note:
            return True
        found = cls.__dict__.get(name)
        if isinstance(found, _Spec) and (not found.init or found.kw_only is True):
            return True
        if type(found).__name__ == "Field":  # a dataclasses.field()
            return True
    return False


def _as_dataclass(cls: type[T]) -> type[T]:
    import dataclasses

    for name, found in list(vars(cls).items()):
        if isinstance(found, _Spec):
            real = found.real()
            setattr(cls, name, dataclasses.field(
                default=real.default, default_factory=real.default_factory, init=real.init,
                repr=real.repr, hash=real.hash, compare=real.compare, metadata=real.metadata,
                kw_only=found.kw_only if found.kw_only is not _MISSING else dataclasses.MISSING,
            ))  # fmt: skip
    return dataclasses.dataclass(frozen=True, slots=True)(cls)


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
        return _as_dataclass(cls)
    name = cls.__name__
    specs: dict[str, _Spec] = {}
    defaulted = ""
    notes = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 -- no inspect
    for field_name, note in notes.items():
        found = cls.__dict__.get(field_name, _MISSING)
        spec = found if isinstance(found, _Spec) else _Spec(default=found)
        if isinstance(found, (list, dict, set)) or (
            spec.default is not _MISSING and type(spec.default).__hash__ is None
        ):
            raise ValueError(
                f"mutable default {type(spec.default)} for field {field_name} is not "
                "allowed: use default_factory"
            )
        if spec.default is _MISSING and spec.default_factory is _MISSING:
            if defaulted:
                raise TypeError(f"non-default argument {field_name!r} follows default argument")
        else:
            defaulted = field_name
        spec.name, spec.type = field_name, note
        specs[field_name] = spec
    names = list(specs)
    body = {k: v for k, v in cls.__dict__.items() if k not in specs}
    for k in ("__dict__", "__weakref__"):
        body.pop(k, None)
    fields_attr = _Lazy("__dataclass_fields__", lambda: {n: s.real() for n, s in specs.items()})
    params_attr = _Lazy("__dataclass_params__", _params)
    body["__slots__"] = tuple(names)
    body["__dataclass_fields__"] = fields_attr
    body["__dataclass_params__"] = params_attr
    body.setdefault("__match_args__", tuple(names))
    if body.get("__doc__") is None:
        body["__doc__"] = f"{name}({', '.join(names)})"
    new: Any = None  # the class, made below with its methods (which read it when called)

    compared = _tuple_of([s.name for s in specs.values() if s.compare])
    hashed = _tuple_of([s.name for s in specs.values() if (s.compare and s.hash is None) or s.hash])
    shown = [s.name for s in specs.values() if s.repr]

    def __eq__(self: Any, other: object) -> Any:  # noqa: N807
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:  # noqa: N807
        return hash(hashed(self))

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:  # noqa: N807
        said = ", ".join(f"{n}={getattr(self, n)!r}" for n in shown)
        return f"{self.__class__.__qualname__}({said})"

    def __setattr__(self: Any, attr: str, value: Any) -> None:  # noqa: N807
        if type(self) is new or attr in specs:
            from dataclasses import FrozenInstanceError

            raise FrozenInstanceError(f"cannot assign to field {attr!r}")
        super(new, self).__setattr__(attr, value)

    def __delattr__(self: Any, attr: str) -> None:  # noqa: N807
        if type(self) is new or attr in specs:
            from dataclasses import FrozenInstanceError

            raise FrozenInstanceError(f"cannot delete field {attr!r}")
        super(new, self).__delattr__(attr)

    def __getstate__(self: Any) -> list[Any]:  # noqa: N807 -- as dataclass pickles slots
        return [getattr(self, n) for n in names]

    def __setstate__(self: Any, state: list[Any]) -> None:  # noqa: N807
        for n, v in zip(names, state, strict=False):
            object.__setattr__(self, n, v)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        # The first call: compile the real one (it replaces this one) and run it.
        new.__init__ = _compiled_init(new, specs)
        new.__init__(self, *args, **kwargs)

    methods: dict[str, Any] = {
        "__init__": __init__,
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
        "__getstate__": __getstate__,
        "__setstate__": __setstate__,
    }
    for method_name, method in methods.items():
        if method_name not in cls.__dict__:
            method.__qualname__ = f"{cls.__qualname__}.{method_name}"
            body[method_name] = method
    meta: Any = type(cls)
    new = meta(name, cls.__bases__, body)
    new.__qualname__ = cls.__qualname__
    fields_attr.owner = params_attr.owner = new
    _NAMES[new] = tuple(names)
    return new  # type: ignore[no-any-return]


def _compiled_init(cls: Any, specs: dict[str, _Spec]) -> Any:
    """``__init__`` as ``dataclass`` writes it: each field set through ``object``, a
    ``default_factory`` called when its argument is left out, then ``__post_init__``."""
    scope: dict[str, Any] = {"__set": object.__setattr__, "__FACTORY": _FACTORY}
    params, lines = [], []
    for name, spec in specs.items():
        if spec.default_factory is not _MISSING:
            scope[f"__factory_{name}"] = spec.default_factory
            params.append(f"{name}=__FACTORY")
            lines.append(
                f"  __set(self, {name!r}, __factory_{name}() if {name} is __FACTORY else {name})"
            )
            continue
        if spec.default is not _MISSING:
            scope[f"__default_{name}"] = spec.default
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
    init.__annotations__ = {n: s.type for n, s in specs.items()} | {"return": None}
    return init


def field_names(obj: Any) -> tuple[str, ...]:
    """The names of the fields of a value (or of its class), in order."""
    cls = obj if isinstance(obj, type) else type(obj)
    names = _NAMES.get(cls)
    if names is None:
        import dataclasses

        return tuple(f.name for f in dataclasses.fields(cls))
    return names


def replace(obj: T, /, **changes: Any) -> T:
    """``dataclasses.replace``: a copy of ``obj`` with ``changes`` (without importing
    dataclasses for a ``value``)."""
    names = _NAMES.get(type(obj))
    if names is None:
        import dataclasses

        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    for name in names:
        if name not in changes:
            changes[name] = getattr(obj, name)
    return type(obj)(**changes)


if TYPE_CHECKING:  # to the type checker, what it is: a frozen dataclass
    from typing_extensions import dataclass_transform

    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def value(cls: type[T]) -> type[T]: ...

else:
    value = _value
