"""Env factories for the --record edge tests (imported by the CLI as module:factory)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


def no_render() -> Any:
    """CartPole made without a render mode: render() gives no frame, observations no image."""
    return gym.make("CartPole-v1")
