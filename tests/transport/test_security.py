"""Security options: loopback binds, bearer tokens, TLS, and the 256 MiB message limits.

Everything runs over real loopback gRPC. The TLS certificate is a fresh
self-signed one made in the test with ``cryptography`` (valid for
``127.0.0.1`` and ``localhost``).
"""

from __future__ import annotations

import contextlib
import datetime
import hmac
import ipaddress
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import attrs
import gymnasium
import numpy as np
import pytest
import trio
from grpclib.const import Status

import rlmesh_trio as rt
from rlmesh_trio._protocol import MAX_MESSAGE_BYTES, env_pb, model_pb
from rlmesh_trio._wire import check_size
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.transport.server import _conn as _server_conn
from rlmesh_trio.transport.server import _net as _server_net

from .._faults_procs import our_env, our_model
from .._faults_raw import ENV_JOIN, MODEL_JOIN, RawStream, StreamEnd

pytestmark = pytest.mark.timeout(60)

TOKEN = "s3cret-token"
LIMITS = rt.Limits(service_close_timeout=2.0)


def cartpole() -> gymnasium.Env[Any, Any]:
    return gymnasium.make("CartPole-v1")


def route(env: Any, model: Any, **kw: Any) -> rt.Route:
    return rt.Route(env=env, model=model, seeds=[0, 1], max_episode_steps=10, limits=LIMITS, **kw)


# ---------------------------------------------------------------------- binds


async def test_servers_bind_loopback_by_default() -> None:
    async with (
        rt.serve_env(cartpole()) as env,
        rt.serve_model(cartpole_policy) as model,
    ):
        assert env.address.startswith("127.0.0.1:")
        assert model.address.startswith("127.0.0.1:")
    # A bare port (or ":port") also means loopback, as in rlmesh.
    for address in ("0", ":0"):
        async with (
            rt.serve_env(cartpole(), address) as env,
            rt.serve_model(cartpole_policy, address) as model,
        ):
            assert env.address.startswith("127.0.0.1:"), address
            assert model.address.startswith("127.0.0.1:"), address


@pytest.mark.slow
def test_cli_servers_bind_loopback_by_default() -> None:
    with our_env() as env, our_model() as model:
        assert env.address.startswith("tcp://127.0.0.1:")
        assert model.address.startswith("tcp://127.0.0.1:")


# ---------------------------------------------------------------------- bearer token


async def test_env_token_required_and_compared_exactly() -> None:
    async with rt.serve_env(cartpole(), token=TOKEN) as server:
        async with rt.RemoteEnv(server.address, token=TOKEN) as env:
            report = await rt.run_routes([route(env, cartpole_policy)])
        assert report.ok and report.total_episodes == 2
        # No "Bearer " stripping, no trimming: the header must equal the token.
        for token in (None, "wrong", f"Bearer {TOKEN}", f"{TOKEN} ", TOKEN.upper()):
            async with rt.RemoteEnv(server.address, token=token) as env:
                with pytest.raises(rt.ConnectError) as refused:
                    await env.connect()
            assert refused.value.address == server.address
            assert refused.value.detail == "UNAUTHENTICATED: invalid env token", token
        # Join is guarded too (a client may skip the handshake, as 0.1.0 servers allow).
        stream = RawStream(server.address, ENV_JOIN, metadata={"authorization": "wrong"})
        await stream.open()
        try:
            with pytest.raises(StreamEnd) as ended:
                await stream.headers()
        finally:
            await stream.close()
        assert ended.value.status is Status.UNAUTHENTICATED
        assert ended.value.message == "invalid env token"
        # Health stays open for orchestrators' unauthenticated probes.
        assert await rt.check_health(server.address) == "SERVING"


async def test_model_token_required_and_compared_exactly() -> None:
    async with rt.serve_model(cartpole_policy, token=TOKEN) as server:
        async with rt.RemoteModel(server.address, token=TOKEN) as model:
            report = await rt.run_routes([route(cartpole, model)])
        assert report.ok and report.total_episodes == 2
        for token in (None, "wrong", f"Bearer {TOKEN}"):
            async with rt.RemoteModel(server.address, token=token) as model:
                with pytest.raises(rt.ConnectError) as refused:
                    await model.connect()
            assert refused.value.address == server.address
            assert refused.value.detail == "UNAUTHENTICATED: invalid model token", token
        stream = RawStream(server.address, MODEL_JOIN)
        await stream.open()
        try:
            with pytest.raises(StreamEnd) as ended:
                await stream.headers()
        finally:
            await stream.close()
        assert ended.value.status is Status.UNAUTHENTICATED
        assert ended.value.message == "invalid model token"


@pytest.mark.parametrize("side", ["env", "model"])
async def test_token_is_compared_in_constant_time(
    side: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every check goes through ``hmac.compare_digest`` (a spy records the comparisons)."""
    module: Any = _server_conn  # where the token check lives
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(module.hmac, "compare_digest", spy)
    serving: Any = (
        rt.serve_env(cartpole(), token=TOKEN)
        if side == "env"
        else rt.serve_model(cartpole_policy, token=TOKEN)
    )
    client: Any = rt.RemoteEnv if side == "env" else rt.RemoteModel
    async with serving as server:
        for token in (TOKEN, "nope"):
            async with client(server.address, token=token) as remote:
                with contextlib.suppress(rt.ConnectError):
                    await remote.connect()
    assert (TOKEN.encode(), TOKEN.encode()) in compared
    assert (b"nope", TOKEN.encode()) in compared


async def test_wrong_token_fails_the_route_with_a_clear_error() -> None:
    async with rt.serve_env(cartpole(), token=TOKEN) as server:
        async with rt.RemoteEnv(server.address, token="nope") as env:
            with pytest.raises(rt.RunFailed) as failed:
                await rt.run_routes([route(env, cartpole_policy, route_id="guarded")])
    error = failed.value.primary
    assert isinstance(error, rt.ConnectError)
    assert str(error) == (
        f"could not connect to {server.address}: UNAUTHENTICATED: invalid env token"
    )
    assert failed.value.report.outcome("guarded").status == "failed"


@pytest.mark.slow
async def test_cli_servers_take_a_token() -> None:
    with (
        our_env("CartPole-v1", "--token", TOKEN) as env,
        our_model("rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY", "--token", TOKEN) as model,
    ):
        async with (
            rt.RemoteEnv(env.address, token=TOKEN) as remote_env,
            rt.RemoteModel(model.address, token=TOKEN) as remote_model,
        ):
            report = await rt.run_routes([route(remote_env, remote_model)])
        assert report.ok and report.total_episodes == 2
        async with rt.RemoteEnv(env.address) as anonymous:
            with pytest.raises(rt.ConnectError, match="UNAUTHENTICATED"):
                await anonymous.connect()


# ---------------------------------------------------------------------- TLS


@attrs.frozen
class Tls:
    cert: Path
    key: Path

    def server(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        context.set_alpn_protocols(["h2"])
        return context

    def client(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.cert))
        context.set_alpn_protocols(["h2"])
        return context


def _self_signed(directory: Path, name: str) -> Tls:
    """A self-signed certificate for 127.0.0.1/localhost: ``cryptography`` if installed, else
    the ``openssl`` command line."""
    cert_path = directory / f"{name}.pem"
    key_path = directory / f"{name}.key"
    try:
        _self_signed_cryptography(name, cert_path, key_path)
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("neither the cryptography package nor the openssl command is available")
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                str(key_path),
                "-out",
                str(cert_path),
                "-days",
                "1",
                "-subj",
                f"/CN={name}",
                "-addext",
                "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
    return Tls(cert_path, key_path)


def _self_signed_cryptography(name: str, cert_path: Path, key_path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


@pytest.fixture
def tls(tmp_path: Path) -> Tls:
    return _self_signed(tmp_path, "rlmesh-trio-test")


@pytest.fixture
def other_tls(tmp_path: Path) -> Tls:
    return _self_signed(tmp_path, "someone-else")


async def test_tls_route_end_to_end_with_token(tls: Tls) -> None:
    async with (
        rt.serve_env(cartpole(), ssl=tls.server(), token=TOKEN) as env_server,
        rt.serve_model(cartpole_policy, ssl=tls.server(), token=TOKEN) as model_server,
        rt.RemoteEnv(env_server.address, ssl=tls.client(), token=TOKEN) as env,
        rt.RemoteModel(model_server.address, ssl=tls.client(), token=TOKEN) as model,
    ):
        report = await rt.run_routes([route(env, model)])
        assert report.ok and report.total_episodes == 2
        assert [ep.seed for ep in report.episodes] == [0, 1]
        health = await rt.check_health(env_server.address, ssl=tls.client())
        assert health == "SERVING"


async def test_tls_mismatches_fail_fast_with_connect_errors(tls: Tls, other_tls: Tls) -> None:
    async with (
        rt.serve_env(cartpole(), ssl=tls.server()) as tls_server,
        rt.serve_env(cartpole()) as plain_server,
    ):
        cases = [
            ("plaintext client, TLS server", tls_server.address, None),
            ("untrusted certificate", tls_server.address, other_tls.client()),
            ("TLS client, plaintext server", plain_server.address, tls.client()),
        ]
        for what, address, context in cases:
            started = trio.current_time()
            async with rt.RemoteEnv(address, ssl=context, connect_timeout=5.0) as env:
                with pytest.raises(rt.ConnectError) as refused:
                    await env.connect()
            assert refused.value.address == address, what
            # Refused outright, not left to run out the connect timeout.
            assert "timed out" not in refused.value.detail, (what, refused.value.detail)
            assert trio.current_time() - started < 5.0, what
            if what == "untrusted certificate":
                assert "CERTIFICATE_VERIFY_FAILED" in refused.value.detail


# ---------------------------------------------------------------------- message limits


class _Huge:
    """Looks longer than the limit without allocating it (the codecs check ``len`` first)."""

    def __len__(self) -> int:
        return MAX_MESSAGE_BYTES + 1


def test_message_limit_is_256_mib_on_both_servers_and_clients() -> None:
    # The servers' codec is ours now (no grpclib): its error and status types.
    from rlmesh_trio._wire import GrpcError as GRPCError
    from rlmesh_trio._wire import GrpcStatus as Status

    assert MAX_MESSAGE_BYTES == 256 * 1024 * 1024
    for codec in (_server_net.SizeLimitedCodec(),):
        with pytest.raises(GRPCError) as refused:
            codec.decode(_Huge(), env_pb.JoinRequest)  # type: ignore[arg-type]
        assert refused.value.status is Status.RESOURCE_EXHAUSTED
    with pytest.raises(rt.ProtocolError, match="256 MiB"):
        check_size(_Huge(), "a Join request")  # type: ignore[arg-type]
    check_size(b"\0" * 1024, "a small request")  # under the limit: fine


@pytest.mark.parametrize("service", ["env", "model"])
async def test_server_refuses_an_oversized_message_over_grpc(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the limit lowered to 4 KiB, a 16 KiB Join message ends the stream RESOURCE_EXHAUSTED."""
    module: Any = _server_net
    serving: Any
    monkeypatch.setattr(module, "MAX_MESSAGE_BYTES", 4096)
    if service == "env":
        serving = rt.serve_env(cartpole())
        path = ENV_JOIN
        payload = bytes(
            env_pb.JoinRequest(
                request_id="big",
                step=env_pb.StepRequest(action=_big_action()),
            )
        )
    else:
        serving = rt.serve_model(cartpole_policy)
        path = MODEL_JOIN
        payload = bytes(
            model_pb.JoinRequest(
                request_id="big",
                release_adapter=model_pb.ReleaseAdapterRequest(reason="x" * 16384),
            )
        )
    async with serving as server:
        stream = RawStream(server.address, path)
        await stream.open()
        try:
            await stream.send(payload)
            with trio.fail_after(10), pytest.raises(StreamEnd) as ended:
                await stream.recv()
        finally:
            await stream.close()
        print(f"{service} server ended an oversized Join: {ended.value}")
        assert ended.value.status is Status.RESOURCE_EXHAUSTED, ended.value
        # The server is still up for the next client.
        assert await rt.check_health(server.address) == "SERVING"


def _big_action() -> Any:
    space = gymnasium.spaces.Box(0, 255, (16384,), np.uint8)
    return rt.spaces.encode(rt.spaces.from_gymnasium(space), np.zeros(16384, np.uint8))


def test_cli_serves_and_runs_over_tls(tls: Tls, other_tls: Tls, tmp_path: Path) -> None:
    from .._cli import run_cli, serving

    cert, key = str(tls.cert), str(tls.key)
    with (
        serving("serve-env", "CartPole-v1", "--tls-cert", cert, "--tls-key", key) as env,
        serving(
            "serve-model",
            "rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ) as model,
    ):
        common = ["--model", model, "--episodes", "1", "--max-episode-steps", "15", "--no-progress"]
        ok = run_cli("run", "--env", env, *common, "--tls-ca", cert)
        assert ok.returncode == 0, ok.stderr
        assert "completed" in ok.stdout
        checked = run_cli("check", env, "--tls-ca", cert)
        assert checked.returncode == 0, checked.stderr
        assert "health        SERVING" in checked.stdout
        # the wrong CA: refused at connect, one clear error line
        wrong = run_cli("run", "--env", env, *common, "--tls-ca", str(other_tls.cert))
        assert wrong.returncode == 1
        assert "Traceback" not in wrong.stderr
        assert any(line.startswith("error:") for line in wrong.stderr.splitlines())
        # plaintext against a TLS server fails too, it does not hang
        plain = run_cli("check", env, "--timeout", "3")
        assert plain.returncode != 0


def test_cli_tls_options_name_what_is_wrong(tmp_path: Path) -> None:
    from .._cli import run_cli

    missing = tmp_path / "nope.pem"
    only_cert = run_cli("serve-env", "CartPole-v1", "--tls-cert", str(missing))
    assert only_cert.returncode == 2
    assert "--tls-cert and --tls-key go together" in only_cert.stderr
    unreadable = run_cli(
        "serve-env", "CartPole-v1", "--tls-cert", str(missing), "--tls-key", str(missing)
    )
    assert unreadable.returncode == 2 and str(missing) in unreadable.stderr
    bad_ca = run_cli("check", "127.0.0.1:1", "--tls-ca", str(missing))
    assert bad_ca.returncode == 2 and "--tls-ca" in bad_ca.stderr
