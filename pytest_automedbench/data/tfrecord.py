"""Read the image ids out of TFRecord files without TensorFlow (SIIM-ISIC's split, mlebench_prepare.py).

A TFRecord file is a sequence of records: uint64 length, uint32 masked CRC of the length, the data,
uint32 masked CRC of the data (little endian). Each record here is a serialized tf.train.Example:
Example.features (field 1) -> Features.feature (field 1, map entries: key = 1, value = 2) ->
Feature.bytes_list (field 1) -> BytesList.value (field 1). MLE-bench reads the same ids with
TensorFlow (`get_ids_from_tf_records`); the CRCs are not checked here (a damaged file fails to parse).
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterator


class TFRecordError(ValueError):
    """A file is not a readable TFRecord of tf.train.Example records; the message names it."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf):
            raise TFRecordError("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, value) of a protobuf message: bytes for length-delimited fields, int for varints."""
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = int.from_bytes(buf[i:i + size], "little"), i + size
        else:
            raise TFRecordError(f"unsupported protobuf wire type {wire}")
        yield number, value


def records(path: Path) -> Iterator[bytes]:
    data = Path(path).read_bytes()
    i = 0
    while i < len(data):
        if i + 12 > len(data):
            raise TFRecordError(f"{path}: truncated record header at byte {i}")
        (length,) = struct.unpack_from("<Q", data, i)
        start = i + 12
        if start + length + 4 > len(data):
            raise TFRecordError(f"{path}: truncated record at byte {i}")
        yield data[start:start + length]
        i = start + length + 4


def bytes_feature(example: bytes, key: str) -> list[bytes]:
    """The bytes_list values of one feature of a serialized tf.train.Example."""
    for number, features in fields(example):
        if number != 1:
            continue
        for entry_number, entry in fields(features):
            parts = dict(fields(entry)) if entry_number == 1 else {}
            if parts.get(1) == key.encode():
                feature = dict(fields(parts.get(2, b"")))
                return [v for n, v in fields(feature.get(1, b"")) if n == 1]
    return []


def ids(path: Path, feature: str = "image_name") -> list[str]:
    """The `feature` value of every record of a TFRecord file, in order."""
    out = []
    for k, record in enumerate(records(path)):
        values = bytes_feature(record, feature)
        if not values:
            raise TFRecordError(f"{path}: record {k} has no bytes feature {feature!r}")
        out.append(values[0].decode())
    return out


__all__ = ["TFRecordError", "bytes_feature", "fields", "ids", "records"]
