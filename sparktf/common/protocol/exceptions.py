"""The channel's exceptions: a closed peer, a failed authentication, a rejected frame, a server
that turned a connection away.
"""

from __future__ import annotations

from sparktf.errors import SparkTFError


class ChannelClosed(ConnectionError):
    """The peer closed the connection."""


class SecurityError(SparkTFError, ConnectionError):
    """A peer failed sparktf's authentication of its channels (the job secret, or a frame's
    MAC). Nothing the peer sent after that was used."""


class AuthenticationError(SecurityError):
    """The peer did not prove it holds this job's secret."""


class FrameRejected(SecurityError):
    """A frame failed its MAC: forged, altered, replayed or reordered on the wire. The
    connection is closed and nothing of the frame was used."""


class TurnedAway(ConnectionError):
    """The server closed the connection, or said it is busy, before accepting ours (it holds
    too many unauthenticated connections, or our handshake ran past its deadline): not a
    wrong secret. :func:`connect` tries again."""
