"""``rlmesh-trio check``: handshake and health over one connection, then the contract in
plain words."""

from __future__ import annotations

import ssl

import trio

from .._errors import ConnectError
from .._protocol import core_pb
from ..spaces import to_gymnasium
from ..transport.client._remote_env import RemoteEnv
from ..transport.client._remote_model import RemoteModel

__all__ = ["run_check"]


def _space(spec: object) -> str:
    try:
        return repr(to_gymnasium(spec))  # type: ignore[arg-type]
    except Exception as exc:  # an exotic space still gets its kind printed
        return f"<unprintable space: {exc}>"


async def run_check(
    address: str,
    timeout: float,
    is_model: bool,
    token: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> list[str]:
    endpoint: RemoteEnv | RemoteModel = (
        RemoteModel(address, connect_timeout=timeout, token=token, ssl=tls)
        if is_model
        else RemoteEnv(address, connect_timeout=timeout, token=token, ssl=tls)
    )
    try:
        with trio.fail_after(timeout + 1):
            info = await endpoint.connect()
            # On the same connection: a server that allows one (max-connections=1) answers.
            health = await endpoint.health(timeout=timeout)
    except trio.TooSlowError:
        raise ConnectError(address, f"no answer within {timeout}s") from None
    finally:
        with trio.CancelScope(shield=True):
            await endpoint.aclose()
    lines = [f"endpoint      {address}"]
    if info.peer is not None:
        peer = info.peer
        lines.append(
            f"peer          {peer.component} {peer.package_version} "
            f"({peer.language} {peer.language_version}, {peer.os}/{peer.arch})"
        )
    lines.append(f"health        {health if health is not None else 'not served'}")
    lines.append(
        f"editions      {', '.join(info.editions) or '-'}"
        f" (wants {info.preferred_edition or 'no edition'})"
    )
    caps = ", ".join(sorted(k for k, v in info.capabilities.items() if v == "true"))
    lines.append(f"capabilities  {caps or '-'}")
    contract = info.contract
    if contract is not None:
        mode = core_pb.AutoresetMode(contract.autoreset_mode).name
        spec = contract.spec
        lines.append(f"env id        {spec.id if spec else '-'}")
        lines.append(f"num_envs      {contract.num_envs}")
        lines.append(f"autoreset     {mode}")
        if spec is not None:
            lines.append(f"observation   {_space(spec.observation_space)}")
            lines.append(f"action        {_space(spec.action_space)}")
    return lines
