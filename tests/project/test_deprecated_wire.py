"""The wire core went private (``rlmesh_trio._wire``); its old public path warns for one release."""

from __future__ import annotations

import importlib

import pytest

import rlmesh_trio
from rlmesh_trio import _wire


def test_old_wire_path_warns_and_gives_the_same_objects() -> None:
    old = importlib.import_module("rlmesh_trio.wire")
    with pytest.warns(DeprecationWarning, match=r"rlmesh_trio\.wire\.ClientCore .*internal"):
        assert old.ClientCore is _wire.ClientCore
    with pytest.warns(
        DeprecationWarning, match=r"import it from rlmesh_trio \(rlmesh_trio\.ServerLimits\)"
    ):
        assert old.ServerLimits is rlmesh_trio.ServerLimits


def test_old_wire_path_lists_nothing_and_refuses_unknown_names() -> None:
    old = importlib.import_module("rlmesh_trio.wire")
    assert old.__all__ == []
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = old.nope
