"""The channel's authentication: the job secret, the mutual HMAC handshake, and each frame's MAC."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import struct
import time

from sparktf.common.protocol.exceptions import (
    AuthenticationError,
    ChannelClosed,
    FrameRejected,
    TurnedAway,
)
from sparktf.common.protocol.sockets import _recv_exact, recv_before

MAGIC = b"SPARKTF2"  # 2: frames carry a MAC
NONCE_LEN = 32
MAC_LEN = 32
TAG_LEN = 32  # each frame's MAC
GRANTED, DENIED, BUSY = b"\x01", b"\x00", b"\x02"
GREETING_LEN = len(MAGIC) + NONCE_LEN
REPLY_LEN = MAC_LEN + NONCE_LEN  # the client's proof and nonce
MAX_FRAME = 1 << 31  # 2 GiB: only authenticated peers get to send frames
MAX_HELLO = 1 << 16  # the first message (hello), read under the handshake's deadline
_HEADER = struct.Struct("!Q")
_SEQ = struct.Struct("!Q")


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def _mac(secret: bytes, label: bytes, *parts: bytes) -> bytes:
    return hmac.new(secret, label + b"".join(parts), hashlib.sha256).digest()


class FrameMac:
    """One direction of a connection: the MAC of each frame under this direction's key, over
    its sequence number (counted here, never sent) and its bytes."""

    __slots__ = ("_base", "seq", "_label")

    def __init__(self, key: bytes, label: str) -> None:
        self._base = hmac.new(key, digestmod=hashlib.sha256)
        self.seq = 0
        self._label = label

    def _next(self, parts) -> bytes:
        h = self._base.copy()
        h.update(_SEQ.pack(self.seq))
        for part in parts:
            h.update(part)
        self.seq += 1
        return h.digest()

    def seal(self, *parts) -> bytes:
        """The tag of the next frame sent, whose bytes are ``parts`` one after the other."""
        return self._next(parts)

    def verify(self, tag: bytes | memoryview, *parts: bytes | memoryview) -> None:
        """Check the next frame received; :class:`FrameRejected` if its tag is wrong."""
        seq = self.seq
        if not hmac.compare_digest(self._next(parts), bytes(tag)):
            raise FrameRejected(
                f"frame {seq} on the {self._label} failed its MAC: forged, altered, replayed "
                "or reordered on the wire (someone between the two ends, or a peer without "
                "this job's secret); the connection was closed and the frame not used"
            )


class Session:
    """The frame keys of one authenticated connection, from one end's point of view."""

    __slots__ = ("sending", "receiving")

    def __init__(self, send_key: bytes, recv_key: bytes, what: str = "connection") -> None:
        self.sending = FrameMac(send_key, what)
        self.receiving = FrameMac(recv_key, what)

    @classmethod
    def derive(
        cls,
        secret: bytes,
        server_nonce: bytes,
        client_nonce: bytes,
        server: bool,
        what: str = "connection",
    ) -> Session:
        c2s = _mac(secret, b"sparktf frames c2s", server_nonce, client_nonce)
        s2c = _mac(secret, b"sparktf frames s2c", server_nonce, client_nonce)
        return cls(s2c, c2s, what) if server else cls(c2s, s2c, what)


# ------------------------------------------------------------------------------ handshake
def _greeting() -> tuple[bytes, bytes]:
    nonce = secrets.token_bytes(NONCE_LEN)
    return nonce, MAGIC + nonce


def _verdict(
    secret: bytes, server_nonce: bytes, reply: bytes, what: str
) -> tuple[bytes, Session | None]:
    """The server's answer to the client's ``reply``, and the session if it proved the
    secret."""
    client_nonce = reply[MAC_LEN:]
    if not hmac.compare_digest(reply[:MAC_LEN], _mac(secret, b"client", server_nonce)):
        return DENIED, None
    return (
        GRANTED + _mac(secret, b"server", client_nonce, server_nonce),
        Session.derive(secret, server_nonce, client_nonce, server=True, what=what),
    )


def server_handshake(
    sock: socket.socket, secret: bytes, deadline: float, what: str = "connection"
) -> Session:
    """Authenticate the client on ``sock`` (the server side, blocking) before ``deadline``;
    raises on any failure. (Servers with many peers use :class:`Gatekeeper`.)"""
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    nonce, greeting = _greeting()
    sock.sendall(greeting)
    answer, session = _verdict(secret, nonce, bytes(recv_before(sock, REPLY_LEN, deadline)), what)
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    sock.sendall(answer)
    if session is None:
        raise AuthenticationError("client failed the challenge: wrong or missing job secret")
    return session


def client_handshake(
    sock: socket.socket, secret: bytes, timeout: float, what: str = "connection"
) -> Session:
    """Prove we hold ``secret`` and check that the server does too. :class:`TurnedAway` when
    the server closed the connection or was busy before its verdict (try again),
    :class:`AuthenticationError` when it refused the secret or failed its own proof."""
    sock.settimeout(timeout)
    try:
        hello = _recv_exact(sock, GREETING_LEN)
    except (ChannelClosed, ConnectionResetError) as exc:
        raise TurnedAway(f"the server closed the connection before its greeting: {exc}") from None
    if hello[: len(MAGIC)] != MAGIC:
        raise AuthenticationError(
            f"the peer is not a sparktf endpoint of this version (it greeted with "
            f"{hello[: len(MAGIC)]!r}, not {MAGIC!r}): are the driver and the executors "
            "running the same sparktf?"
        )
    server_nonce = hello[len(MAGIC) :]
    nonce = secrets.token_bytes(NONCE_LEN)
    sock.sendall(_mac(secret, b"client", server_nonce) + nonce)
    try:
        verdict = _recv_exact(sock, 1)
        if verdict == GRANTED:
            proof = _recv_exact(sock, MAC_LEN)
    except (ChannelClosed, ConnectionResetError) as exc:
        raise TurnedAway(
            "the server closed the connection before its verdict (our handshake ran past its "
            f"deadline, or it made room for others under a flood), not a wrong secret: {exc}"
        ) from None
    if verdict == BUSY:
        raise TurnedAway("the server takes no more peers now")
    if verdict != GRANTED:
        raise AuthenticationError("the server refused this job secret")
    if not hmac.compare_digest(proof, _mac(secret, b"server", nonce, server_nonce)):
        raise AuthenticationError("the server failed the challenge: wrong job secret")
    sock.settimeout(None)
    return Session.derive(secret, server_nonce, nonce, server=False, what=what)


# ---------------------------------------------------------------------- sealed payloads
#: A sealed payload: the AES-GCM nonce, then the ciphertext and its tag.
SEALED_NONCE_LEN = 12


def _payload_key(secret: bytes, purpose: bytes) -> bytes:
    return _mac(secret, b"sparktf sealed " + purpose)


def seal_payload(secret: bytes, purpose: bytes, data: bytes) -> bytes:
    """``data`` encrypted and authenticated (AES-256-GCM, ``cryptography``'s) under a key
    derived from the job's ``secret`` for ``purpose``: for what the channel's frames, which
    are authenticated but not encrypted, must not show on the wire (a secure cluster's
    delegation tokens)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = secrets.token_bytes(SEALED_NONCE_LEN)
    return nonce + AESGCM(_payload_key(secret, purpose)).encrypt(nonce, data, purpose)


def open_payload(secret: bytes, purpose: bytes, sealed: bytes) -> bytes:
    """What :func:`seal_payload` sealed; :class:`FrameRejected` if it was sealed under another
    secret or purpose, or altered."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce, body = sealed[:SEALED_NONCE_LEN], sealed[SEALED_NONCE_LEN:]
    try:
        return AESGCM(_payload_key(secret, purpose)).decrypt(nonce, body, purpose)
    except (InvalidTag, ValueError) as exc:
        raise FrameRejected(
            f"a sealed {purpose.decode()} payload failed its check: altered, or sealed under "
            "another job's secret"
        ) from exc
