"""The control and log channel between the driver and its nodes, and the handshake and frame
authentication that the node-to-node row exchange shares with it.

A TCP connection, authenticated before anything else with a mutual HMAC-SHA256
challenge-response over a per-job secret; then length-prefixed pickled messages (dicts), each
carrying a MAC that is checked before a byte of it is unpickled.

Handshake (fixed sizes, so an unauthenticated peer can never make the server allocate or
unpickle anything)::

    server -> client   MAGIC | sn                           sn, cn: 32-byte random nonces
    client -> server   HMAC(secret, "client" | sn) | cn
    server -> client   GRANTED | HMAC(secret, "server" | cn | sn)
                    or DENIED  (the client's MAC is wrong: the one "wrong secret" answer)
                    or BUSY    (the server takes no more peers now: try again)

A server that closes the connection before its verdict (its handshake deadline passed, or it
dropped the connection to make room under a flood) is *not* a refusal of the secret: the
client tries again (:class:`TurnedAway`), and only ``DENIED`` or a wrong server proof is an
:class:`AuthenticationError`.

Frames after the handshake: each direction has its own key and sequence number,

    k_c2s = HMAC(secret, "sparktf frames c2s" | sn | cn)     (client to server)
    k_s2c = HMAC(secret, "sparktf frames s2c" | sn | cn)     (server to client)
    frame = header | payload | HMAC(k_dir, seq | header | payload)   seq: 8 bytes, from 0

so a frame forged without the secret, altered, replayed, reordered, dropped from the middle,
reflected back to its sender or carried over from another connection fails its MAC, and the
receiver refuses it (:class:`FrameRejected`) before it is used. The sequence number is
counted by both ends, never sent. The frames are authenticated, not encrypted: see
docs/reliability.md, "Security".

The secret itself never crosses the wire. This module imports neither pyspark nor tensorflow.

The modules: :mod:`~sparktf.common.protocol.auth` (secret, handshake, frame MACs),
:mod:`~sparktf.common.protocol.channel` (Channel, connect),
:mod:`~sparktf.common.protocol.gatekeeper` (the server's accepting side),
:mod:`~sparktf.common.protocol.sockets` (reads and waits with deadlines),
:mod:`~sparktf.common.protocol.exceptions`. Use them through this package: ``protocol.connect``.

Modules:

- ``auth``: The channel's authentication: the job secret, the mutual HMAC handshake, frame MACs
- ``channel``: A connection carrying pickled, MAC-sealed messages (``Channel``)
- ``exceptions``: The channel's exceptions: a closed peer, a failed authentication, a rejected frame
- ``gatekeeper``: The server's side of the handshake: accepting and authenticating connections
- ``sockets``: Socket reads and waits with deadlines
"""

from __future__ import annotations

from sparktf.common.protocol.auth import (
    BUSY,
    DENIED,
    GRANTED,
    GREETING_LEN,
    MAC_LEN,
    MAGIC,
    MAX_FRAME,
    MAX_HELLO,
    NONCE_LEN,
    REPLY_LEN,
    TAG_LEN,
    FrameMac,
    Session,
    client_handshake,
    new_secret,
    open_payload,
    seal_payload,
    server_handshake,
)
from sparktf.common.protocol.channel import TRY_TIMEOUT, Channel, connect, connect_once
from sparktf.common.protocol.exceptions import (
    AuthenticationError,
    ChannelClosed,
    FrameRejected,
    SecurityError,
    TurnedAway,
)
from sparktf.common.protocol.gatekeeper import (
    EVICT_AFTER,
    LOG_EVERY,
    RESOURCE_ERRORS,
    TRANSIENT_ERRORS,
    Gatekeeper,
)
from sparktf.common.protocol.sockets import (
    recv_before,
    recv_exact_into,
    wait_readable,
    wait_writable,
)

__all__ = [
    "open_payload",
    "seal_payload",
    "AuthenticationError",
    "BUSY",
    "Channel",
    "ChannelClosed",
    "DENIED",
    "EVICT_AFTER",
    "FrameMac",
    "FrameRejected",
    "GRANTED",
    "GREETING_LEN",
    "Gatekeeper",
    "LOG_EVERY",
    "MAC_LEN",
    "MAGIC",
    "MAX_FRAME",
    "MAX_HELLO",
    "NONCE_LEN",
    "REPLY_LEN",
    "RESOURCE_ERRORS",
    "SecurityError",
    "Session",
    "TAG_LEN",
    "TRANSIENT_ERRORS",
    "TRY_TIMEOUT",
    "TurnedAway",
    "client_handshake",
    "connect",
    "connect_once",
    "new_secret",
    "recv_before",
    "recv_exact_into",
    "server_handshake",
    "wait_readable",
    "wait_writable",
]
