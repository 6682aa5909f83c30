"""TensorBoard event files as the tests read them back, without TensorFlow."""

import struct


def read_scalars(path):
    """(step, tag, value) of every scalar in a TFRecord file of tensorboard Events."""
    from tensorboard.compat.proto.event_pb2 import Event

    out = []
    with open(path, "rb") as f:
        while header := f.read(12):
            (length,) = struct.unpack("<Q", header[:8])
            data = f.read(length)
            f.read(4)  # the data's CRC
            event = Event.FromString(data)
            for value in event.summary.value:
                out.append((event.step, value.tag, value.simple_value))
    return out
