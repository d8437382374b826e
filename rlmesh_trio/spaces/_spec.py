"""gymnasium spaces <-> wire ``SpaceSpec``, following the conventions 0.1.0 writes (§6.3).

Decisions worth knowing:

* ``Discrete`` always goes out as ``INT64`` (0.1.0 does the same even for an
  ``int32`` gymnasium space); a peer's spec may declare another integer type and
  the codec then uses that width.
* ``MultiDiscrete`` has no ``start`` on the wire. Like 0.1.0 we drop a non-zero
  start (values travel 0-based, and the space we rebuild has ``start=0``), but
  unlike 0.1.0 we say so with a :class:`UserWarning` instead of staying silent.
* ``Dict`` keys go out sorted (Python ``str`` order equals UTF-8 byte order, the
  order 0.1.0's Rust producer uses); :func:`to_gymnasium` keeps the wire order.
* Every refusal is a :class:`~rlmesh_trio.ProtocolError` naming the sub-space
  path (``$``, ``$.image``, ``$.pair[1]``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from gymnasium.spaces.text import alphanumeric

from .._errors import ProtocolError
from .._protocol import spaces_pb
from ._cache import IdentityCache
from ._dtypes import DT, dtype_of_numpy, numpy_of_dtype

__all__ = ["KEY_ORDER", "child_path", "from_gymnasium", "spec_kind", "to_gymnasium"]

#: The gymnasium key order of each ``DictSpec`` that :func:`from_gymnasium` built,
#: so decoded dicts come back in the order the env author wrote, not wire order.
KEY_ORDER: IdentityCache[tuple[str, ...]] = IdentityCache()

_DEFAULT_CHARSET = frozenset(alphanumeric)
_SPEC_KINDS = ("box", "discrete", "multi_binary", "multi_discrete", "text", "dict", "tuple")


def child_path(path: str, key: str | int) -> str:
    """The path of a Dict entry (``$.key``) or Tuple element (``$[1]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}"


def spec_kind(spec: spaces_pb.SpaceSpec, path: str) -> str:
    """Which arm of ``SpaceSpec.spec`` is set; an unset or unknown arm is a ``ProtocolError``."""
    for name in _SPEC_KINDS:
        if getattr(spec, name) is not None:
            return name
    raise ProtocolError("unknown or missing SpaceSpec kind (no spec arm set)", path=path)


# --------------------------------------------------------------------------- gymnasium -> wire


def from_gymnasium(space: gymnasium.Space[Any], *, path: str = "$") -> spaces_pb.SpaceSpec:
    """Describe a gymnasium space as a wire ``SpaceSpec``, byte-compatible with 0.1.0.

    Raises :class:`~rlmesh_trio.ProtocolError` for spaces wire-v1 cannot carry
    (scalar ``Box``, ``Text(min_length=0)``, ``Sequence``, ``Graph``, ...).
    """
    # isinstance, in table order, so subclasses of the gymnasium spaces map too.
    for space_type, describe in _FROM_GYMNASIUM:
        if isinstance(space, space_type):
            return describe(space, path)
    raise ProtocolError(
        f"unsupported space type {type(space).__name__} (wire-v1 carries Box, Discrete, "
        "MultiBinary, MultiDiscrete, Text, Dict and Tuple)",
        path=path,
    )


def _box_to_spec(space: gymnasium.spaces.Box, path: str) -> spaces_pb.SpaceSpec:
    if len(space.shape) == 0:
        raise ProtocolError("[Box] shape must be set (rank >= 1)", path=path)
    code = dtype_of_numpy(space.dtype, path=path)
    wire_dt = numpy_of_dtype(code, path=path)
    low = np.asarray(space.low).reshape(-1)
    high = np.asarray(space.high).reshape(-1)
    box: spaces_pb.BoxSpec
    if wire_dt.kind == "f" and bool(np.all(np.isneginf(low))) and bool(np.all(np.isposinf(high))):
        box = spaces_pb.BoxSpec(unbounded=True)
    elif low.size > 0 and bool(np.all(low == low[0])) and bool(np.all(high == high[0])):
        box = spaces_pb.BoxSpec(
            uniform=spaces_pb.UniformBounds(
                low=low[:1].astype(wire_dt).tobytes(), high=high[:1].astype(wire_dt).tobytes()
            )
        )
    else:
        box = spaces_pb.BoxSpec(
            elementwise=spaces_pb.ElementwiseBounds(
                low=low.astype(wire_dt).tobytes(), high=high.astype(wire_dt).tobytes()
            )
        )
    return spaces_pb.SpaceSpec(shape=[int(d) for d in space.shape], dtype=code, box=box)


def _discrete_to_spec(space: gymnasium.spaces.Discrete, path: str) -> spaces_pb.SpaceSpec:
    return spaces_pb.SpaceSpec(
        shape=[],
        dtype=DT.INT64,
        discrete=spaces_pb.DiscreteSpec(n=int(space.n), start=int(space.start)),
    )


def _multi_binary_to_spec(space: gymnasium.spaces.MultiBinary, path: str) -> spaces_pb.SpaceSpec:
    return spaces_pb.SpaceSpec(
        shape=[int(d) for d in space.shape],
        dtype=DT.UINT8,
        multi_binary=spaces_pb.MultiBinarySpec(),
    )


def _multi_discrete_to_spec(
    space: gymnasium.spaces.MultiDiscrete, path: str
) -> spaces_pb.SpaceSpec:
    if np.any(space.start != 0):
        warnings.warn(
            f"{path}: MultiDiscrete start {space.start.tolist()} is not carried by "
            "rlmesh-wire-v1; values travel 0-based and the start is dropped (as 0.1.0 does)",
            UserWarning,
            # Name from_gymnasium's caller: this helper, then from_gymnasium, sit above it.
            stacklevel=3,
        )
    return spaces_pb.SpaceSpec(
        shape=[int(d) for d in space.shape],
        dtype=DT.INT64,
        multi_discrete=spaces_pb.MultiDiscreteSpec(
            nvec=[int(v) for v in np.asarray(space.nvec).reshape(-1)]
        ),
    )


def _text_to_spec(space: gymnasium.spaces.Text, path: str) -> spaces_pb.SpaceSpec:
    if space.min_length <= 0:
        raise ProtocolError("[Text] min_length must be > 0", path=path)
    charset = "" if space.character_set == _DEFAULT_CHARSET else space.characters
    return spaces_pb.SpaceSpec(
        shape=[],
        dtype=DT.UINT8,
        text=spaces_pb.TextSpec(
            min_length=int(space.min_length),
            max_length=int(space.max_length),
            charset=charset,
        ),
    )


def _dict_to_spec(space: gymnasium.spaces.Dict, path: str) -> spaces_pb.SpaceSpec:
    for key in space.spaces:
        if not isinstance(key, str):
            raise ProtocolError(f"Dict keys must be str, got {key!r}", path=path)
    keys = sorted(space.spaces)
    dict_spec = spaces_pb.DictSpec(
        keys=keys,
        spaces=[from_gymnasium(space.spaces[k], path=child_path(path, k)) for k in keys],
    )
    KEY_ORDER.put(dict_spec, tuple(space.spaces))
    return spaces_pb.SpaceSpec(shape=[], dtype=DT.UNSPECIFIED, dict=dict_spec)


def _tuple_to_spec(space: gymnasium.spaces.Tuple, path: str) -> spaces_pb.SpaceSpec:
    return spaces_pb.SpaceSpec(
        shape=[],
        dtype=DT.UNSPECIFIED,
        tuple=spaces_pb.TupleSpec(
            spaces=[
                from_gymnasium(child, path=child_path(path, i))
                for i, child in enumerate(space.spaces)
            ]
        ),
    )


_FROM_GYMNASIUM: tuple[tuple[type[Any], Callable[[Any, str], spaces_pb.SpaceSpec]], ...] = (
    (gymnasium.spaces.Box, _box_to_spec),
    (gymnasium.spaces.Discrete, _discrete_to_spec),
    (gymnasium.spaces.MultiBinary, _multi_binary_to_spec),
    (gymnasium.spaces.MultiDiscrete, _multi_discrete_to_spec),
    (gymnasium.spaces.Text, _text_to_spec),
    (gymnasium.spaces.Dict, _dict_to_spec),
    (gymnasium.spaces.Tuple, _tuple_to_spec),
)


# --------------------------------------------------------------------------- wire -> gymnasium


def check_shape(spec: spaces_pb.SpaceSpec, path: str) -> tuple[int, ...]:
    """The spec's shape as a tuple; negative dimensions are refused."""
    shape = tuple(int(d) for d in spec.shape)
    if any(d < 0 for d in shape):
        raise ProtocolError(f"negative dimension in shape {list(shape)}", path=path)
    return shape


def box_bounds(
    spec: spaces_pb.SpaceSpec, dt: np.dtype, shape: tuple[int, ...], path: str
) -> tuple[np.ndarray, np.ndarray]:
    """Decode a ``BoxSpec``'s bounds into two arrays of ``shape``, checking the byte lengths."""
    box = spec.box
    assert box is not None
    numel = int(np.prod(shape, dtype=np.int64))
    width = dt.itemsize
    if box.uniform is not None:
        lo, hi = box.uniform.low, box.uniform.high
        for name, raw in (("low", lo), ("high", hi)):
            if len(raw) != width:
                raise ProtocolError(
                    f"uniform {name} bound: got {len(raw)} bytes, expected 1 * {width} ({dt.name})",
                    path=path,
                )
        low = np.full(shape, np.frombuffer(lo, dtype=dt)[0], dtype=dt)
        high = np.full(shape, np.frombuffer(hi, dtype=dt)[0], dtype=dt)
        return low, high
    if box.elementwise is not None:
        lo, hi = box.elementwise.low, box.elementwise.high
        for name, raw in (("low", lo), ("high", hi)):
            if len(raw) != numel * width:
                raise ProtocolError(
                    f"elementwise {name} bound: got {len(raw)} bytes, "
                    f"expected {numel} * {width} ({dt.name})",
                    path=path,
                )
        low = np.frombuffer(lo, dtype=dt).reshape(shape).copy()
        high = np.frombuffer(hi, dtype=dt).reshape(shape).copy()
        return low, high
    # ``unbounded`` (or no bounds arm at all, which we read the same way).
    if dt.kind == "f":
        return np.full(shape, -np.inf, dtype=dt), np.full(shape, np.inf, dtype=dt)
    if dt.kind == "b":
        return np.zeros(shape, dtype=dt), np.ones(shape, dtype=dt)
    info = np.iinfo(dt)
    return np.full(shape, info.min, dtype=dt), np.full(shape, info.max, dtype=dt)


def to_gymnasium(spec: spaces_pb.SpaceSpec, *, path: str = "$") -> gymnasium.Space[Any]:
    """Rebuild the gymnasium space a wire ``SpaceSpec`` describes.

    ``Dict`` entries keep the wire key order. Raises
    :class:`~rlmesh_trio.ProtocolError` on a malformed spec.
    """
    kind = spec_kind(spec, path)
    shape = check_shape(spec, path)
    return _TO_GYMNASIUM[kind](spec, shape, path)


def _box_of(spec: spaces_pb.SpaceSpec, shape: tuple[int, ...], path: str) -> gymnasium.Space[Any]:
    if len(shape) == 0:
        raise ProtocolError("[Box] shape must be set (rank >= 1)", path=path)
    dt = numpy_of_dtype(spec.dtype, path=path)
    low, high = box_bounds(spec, dt, shape, path)
    native: Any = dt.newbyteorder("=")  # gymnasium's stubs type dtype= narrower than numpy's
    return gymnasium.spaces.Box(low=low, high=high, shape=shape, dtype=native)


def _discrete_of(
    spec: spaces_pb.SpaceSpec, shape: tuple[int, ...], path: str
) -> gymnasium.Space[Any]:
    d = spec.discrete
    assert d is not None
    if d.n <= 0:
        raise ProtocolError(f"[Discrete] n must be > 0, got {d.n}", path=path)
    return gymnasium.spaces.Discrete(int(d.n), start=int(d.start))


def _multi_binary_of(
    spec: spaces_pb.SpaceSpec, shape: tuple[int, ...], path: str
) -> gymnasium.Space[Any]:
    return gymnasium.spaces.MultiBinary(list(shape) if len(shape) != 1 else shape[0])


def _multi_discrete_of(
    spec: spaces_pb.SpaceSpec, shape: tuple[int, ...], path: str
) -> gymnasium.Space[Any]:
    md = spec.multi_discrete
    assert md is not None
    nvec = np.asarray(list(md.nvec), dtype=np.int64)
    if nvec.size != int(np.prod(shape, dtype=np.int64)):
        raise ProtocolError(
            f"[MultiDiscrete] nvec has {nvec.size} entries, shape {list(shape)} needs "
            f"{int(np.prod(shape, dtype=np.int64))}",
            path=path,
        )
    if np.any(nvec <= 0):
        raise ProtocolError(f"[MultiDiscrete] nvec must be > 0, got {nvec.tolist()}", path=path)
    return gymnasium.spaces.MultiDiscrete(nvec.reshape(shape))


def _text_of(spec: spaces_pb.SpaceSpec, shape: tuple[int, ...], path: str) -> gymnasium.Space[Any]:
    t = spec.text
    assert t is not None
    # 0.1.0 refuses such a spec in resolve ("decode error: $: [Text] min_length must be > 0").
    if t.min_length <= 0:
        raise ProtocolError("[Text] min_length must be > 0", path=path)
    if t.max_length < t.min_length:
        raise ProtocolError(
            f"[Text] max_length {t.max_length} is below min_length {t.min_length}", path=path
        )
    kwargs: dict[str, Any] = {"min_length": int(t.min_length)}
    if t.charset:
        kwargs["charset"] = t.charset
    return gymnasium.spaces.Text(int(t.max_length), **kwargs)


def _dict_of(spec: spaces_pb.SpaceSpec, shape: tuple[int, ...], path: str) -> gymnasium.Space[Any]:
    d = spec.dict
    assert d is not None
    if len(d.keys) != len(d.spaces):
        raise ProtocolError(f"[Dict] {len(d.keys)} keys but {len(d.spaces)} spaces", path=path)
    # A list of pairs, not a dict: gymnasium sorts plain dicts, and we keep wire order.
    return gymnasium.spaces.Dict(
        [
            (k, to_gymnasium(s, path=child_path(path, k)))
            for k, s in zip(d.keys, d.spaces, strict=True)
        ]
    )


def _tuple_of(spec: spaces_pb.SpaceSpec, shape: tuple[int, ...], path: str) -> gymnasium.Space[Any]:
    t = spec.tuple
    assert t is not None
    return gymnasium.spaces.Tuple(
        [to_gymnasium(s, path=child_path(path, i)) for i, s in enumerate(t.spaces)]
    )


_SpaceOf = Callable[[spaces_pb.SpaceSpec, tuple[int, ...], str], gymnasium.Space[Any]]

#: One builder per ``spec_kind`` (the keys are exactly ``_SPEC_KINDS``).
_TO_GYMNASIUM: dict[str, _SpaceOf] = {
    "box": _box_of,
    "discrete": _discrete_of,
    "multi_binary": _multi_binary_of,
    "multi_discrete": _multi_discrete_of,
    "text": _text_of,
    "dict": _dict_of,
    "tuple": _tuple_of,
}
