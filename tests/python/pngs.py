"""Small PNG files written with the standard library (test textures)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def write_checker_png(path: Path, size: int = 16, seed: int = 0) -> None:
    """An RGB checkerboard of `size` x `size` pixels; `seed` changes its colours."""
    rows = b""
    for y in range(size):
        row = bytearray([0])
        for x in range(size):
            on = ((x // 4) + (y // 4)) % 2 == 0
            colour = [(200 + seed) % 256, 40, 40] if on else [30, 30, (220 + seed) % 256]
            row += bytes(colour)
        rows += bytes(row)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
                     chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
