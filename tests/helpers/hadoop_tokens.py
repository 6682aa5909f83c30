"""Hadoop token storage files built byte for byte (Hadoop's WritableUtils rules), as a YARN
container's HADOOP_TOKEN_FILE_LOCATION holds them (tests/unit/test_fs_tokens.py,
tests/unit/test_fs_kerberos.py)."""


def vlong(i):
    """Hadoop's WritableUtils.writeVLong."""
    if -112 <= i <= 127:
        return bytes([i & 0xFF])
    length = -112
    if i < 0:
        i ^= -1
        length = -120
    tmp = i
    while tmp:
        tmp >>= 8
        length -= 1
    out = bytes([length & 0xFF])
    n = -(length + 120) if length < -120 else -(length + 112)
    return out + b"".join(bytes([(i >> ((idx - 1) * 8)) & 0xFF]) for idx in range(n, 0, -1))


def text(b):
    return vlong(len(b)) + b


def token(ident, password, kind, service):
    return text(ident) + text(password) + text(kind.encode()) + text(service.encode())


def storage(*toks):
    """A token storage file: HDTS, version 0, the tokens (alias, token), no secret keys."""
    body = b"".join(text(f"alias{i}".encode()) + t for i, t in enumerate(toks))
    return b"HDTS\x00" + vlong(len(toks)) + body + vlong(0)
