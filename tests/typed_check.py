"""Strict validation of a JSON value against a TypedDict type.

``check(value, tp)`` returns the list of problems (empty when the value
conforms), each as "$.path: what is wrong".  Strict means: a key the
TypedDict does not declare is a problem, a required key that is missing is
a problem, and ``bool`` is never accepted where ``int`` or ``float`` is
asked for.  It understands what the official SDKs' request types use:
TypedDicts (``__required_keys__``/``__optional_keys__``, nested, forward
references), ``Literal``, ``Union``/``Optional``/``X | Y``, ``Required``/
``NotRequired``/``ReadOnly``/``Annotated`` wrappers, ``List``/``Sequence``/
``Iterable`` (and the SDKs' ``SequenceNotStr``), ``Dict``/``Mapping``,
``str``/``int``/``float``/``bool``/``None``, ``object``/``Any``.
"""

import collections.abc
import types
import typing

try:
    import typing_extensions as _tx
except ImportError:  # pragma: no cover - the SDKs depend on it
    _tx = typing

_WRAPPERS = {"Required", "NotRequired", "ReadOnly", "Annotated"}
_SEQUENCES = {list, collections.abc.Sequence, collections.abc.Iterable,
              collections.abc.MutableSequence, collections.abc.Collection}
_MAPPINGS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}


def is_typeddict(tp):
    return _tx.is_typeddict(tp) or typing.is_typeddict(tp)


def _origin_name(tp):
    origin = typing.get_origin(tp)
    if origin is None:
        return None
    return getattr(origin, "_name", None) or getattr(origin, "__name__", None)


def _unwrap(tp):
    """Strip Required/NotRequired/ReadOnly/Annotated, however nested."""
    while True:
        name = _origin_name(tp)
        if name in _WRAPPERS or typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        if getattr(tp, "__metadata__", None) is not None and hasattr(tp, "__origin__"):
            tp = tp.__origin__  # Annotated from typing_extensions
            continue
        return tp


def _hints(td):
    """(hints, required keys) of a TypedDict.

    ``__required_keys__`` alone is not enough: under ``from __future__ import
    annotations`` (the SDKs' modules) Python 3.11 cannot see a ``Required[]``
    inside a string annotation, so the wrappers are read from the hints too.
    """
    cache = _hints.cache
    if td not in cache:
        raw = typing.get_type_hints(td, include_extras=True)
        required = set()
        for key, hint in raw.items():
            name = _origin_name(hint)
            if name == "Required" or (key in td.__required_keys__ and name != "NotRequired"):
                required.add(key)
        cache[td] = ({k: _unwrap(v) for k, v in raw.items()}, frozenset(required))
    return cache[td]


_hints.cache = {}


def required_keys(td):
    return _hints(td)[1]


def _kind(value):
    return "null" if value is None else type(value).__name__


def check(value, tp, path="$"):
    """Every way `value` fails to be a `tp`, as a list of strings."""
    tp = _unwrap(tp)
    if tp is typing.Any or tp is object:
        return []
    if tp is None or tp is type(None):
        return [] if value is None else [f"{path}: expected null, got {_kind(value)}"]
    if is_typeddict(tp):
        return _check_typeddict(value, tp, path)
    if isinstance(tp, typing.TypeVar):
        return []
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal or origin is _tx.Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return []
        return [f"{path}: {value!r} is not one of {list(args)!r}"]
    if origin is typing.Union or origin is types.UnionType:
        return _check_union(value, args, path)
    if origin in _SEQUENCES or _is_sequence_protocol(tp):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {_kind(value)}"]
        item = args[0] if args else typing.Any
        errors = []
        for i, v in enumerate(value):
            errors += check(v, item, f"{path}[{i}]")
        return errors
    if origin in _MAPPINGS or tp in _MAPPINGS:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {_kind(value)}"]
        key_t, val_t = args if args else (str, typing.Any)
        errors = []
        for k, v in value.items():
            errors += check(k, key_t, f"{path}.<key {k!r}>")
            errors += check(v, val_t, f"{path}.{k}")
        return errors
    if tp in _SEQUENCES:
        return [] if isinstance(value, list) else [f"{path}: expected a list, got {_kind(value)}"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean, got {_kind(value)}"]
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected an integer, got {_kind(value)}"]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected a number, got {_kind(value)}"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string, got {_kind(value)}"]
    supertype = getattr(tp, "__supertype__", None)  # NewType
    if supertype is not None:
        return check(value, supertype, path)
    alias = getattr(tp, "__value__", None)  # TypeAliasType
    if alias is not None:
        return check(value, alias, path)
    if isinstance(tp, type):
        # A class such as a pydantic model of a response block: the SDK takes
        # an instance of it, which no JSON value is.
        if isinstance(value, tp):
            return []
        return [f"{path}: expected a {tp.__name__} instance, got {_kind(value)}"]
    raise TypeError(f"{path}: typed_check cannot check against {tp!r}")


def _is_sequence_protocol(tp):
    origin = typing.get_origin(tp) or tp
    return getattr(origin, "__name__", "") == "SequenceNotStr"


def _check_typeddict(value, td, path):
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({td.__name__}), got {_kind(value)}"]
    hints, required = _hints(td)
    errors = []
    for key in sorted(required - value.keys()):
        errors.append(f"{path}: missing required key {key!r} ({td.__name__})")
    for key, v in value.items():
        if key not in hints:
            errors.append(f"{path}: unknown key {key!r} ({td.__name__})")
            continue
        errors += check(v, hints[key], f"{path}.{key}")
    return errors


def _wrong_shape(errors, path):
    """True when `errors` only say the value at `path` itself is of another kind."""
    return len(errors) == 1 and errors[0].startswith(f"{path}: expected ")


def _literal_key(td):
    """The keys of `td` whose type is a Literal (its discriminators)."""
    out = {}
    for key, hint in _hints(td)[0].items():
        if typing.get_origin(hint) in (typing.Literal, _tx.Literal):
            out[key] = typing.get_args(hint)
    return out


def _check_union(value, args, path):
    results = []
    for alt in args:
        errors = check(value, alt, path)
        if not errors:
            return []
        results.append((alt, errors))
    # Name the problems of the alternative the value meant to be: a TypedDict
    # whose discriminator (e.g. "type") matches, else the one closest to it.
    if isinstance(value, dict):
        for alt, errors in results:
            alt = _unwrap(alt)
            if is_typeddict(alt):
                lits = _literal_key(alt)
                if lits and all(k in value and value[k] in v for k, v in lits.items()
                                if k in required_keys(alt)):
                    return errors
    # Or the only alternative of the value's shape (a list for a list type).
    shaped = [errors for alt, errors in results if not _wrong_shape(errors, path)]
    if len(shaped) == 1:
        return shaped[0]
    best = min(results, key=lambda r: len(r[1]))
    names = ", ".join(getattr(_unwrap(a), "__name__", repr(a)) for a, _ in results)
    return [f"{path}: matches none of {names}; closest: " + "; ".join(best[1][:3])]
