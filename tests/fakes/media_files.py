"""Small real media files, made in code for tests: an Ogg Opus voice note, a JPEG, a PNG, a PDF
with a text layer and a scanned-looking PDF without one. Each is valid for the libraries that read
it (the Ogg pages carry correct CRCs, the PDF's cross-reference offsets are exact); cut one short
(``[:n]``) to get a damaged file.
"""

from __future__ import annotations

import struct
import zlib

__all__ = ["ogg_opus", "jpeg", "png", "pdf_with_text", "pdf_pages", "pdf_scanned", "ogg_crc"]

_OPUS_RATE = 48_000  # an Opus stream's granule positions count 48 kHz samples
_FRAME_SAMPLES = 960  # one 20 ms frame


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else (r << 1)
        table.append(r & 0xFFFFFFFF)
    return table


_CRC = _crc_table()


def ogg_crc(data: bytes) -> int:
    """Ogg's page checksum (CRC-32, polynomial 0x04C11DB7, not reflected, starting at 0)."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _CRC[((crc >> 24) & 0xFF) ^ byte]
    return crc


def _page(packets: list[bytes], *, granule: int, serial: int, seq: int, flags: int) -> bytes:
    lacing = bytearray()
    for packet in packets:
        lacing += b"\xff" * (len(packet) // 255) + bytes([len(packet) % 255])
    header = struct.pack("<4sBBqIIIB", b"OggS", 0, flags, granule, serial, seq, 0, len(lacing)) + bytes(lacing)
    page = bytearray(header + b"".join(packets))
    page[22:26] = struct.pack("<I", ogg_crc(bytes(page)))
    return bytes(page)


def ogg_opus(seconds: float = 3.0, *, serial: int = 0x42525543) -> bytes:
    """An Ogg Opus stream of ``seconds`` (OpusHead, OpusTags, then 20 ms silent frames, 50 to a
    page); its last page's granule position gives the duration (48 kHz, after the pre-skip)."""
    pre_skip = 312
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, pre_skip, _OPUS_RATE, 0, 0)
    vendor = b"bruce-tests"
    tags = b"OpusTags" + struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", 0)
    pages = [_page([head], granule=0, serial=serial, seq=0, flags=0x02),
             _page([tags], granule=0, serial=serial, seq=1, flags=0)]
    frames = max(1, round(seconds * _OPUS_RATE / _FRAME_SAMPLES))
    silent = b"\xf8\xff\xfe"  # an Opus TOC byte for a 20 ms CELT frame, then a silent payload
    seq, done = 2, 0
    while done < frames:
        count = min(50, frames - done)
        done += count
        last = done == frames
        pages.append(_page([silent] * count, granule=pre_skip + done * _FRAME_SAMPLES, serial=serial, seq=seq,
                           flags=0x04 if last else 0))
        seq += 1
    return b"".join(pages)


# A 2x2 baseline JPEG (JFIF), grey; small, valid, and decodable by every reader.
_JPEG = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300080606070605080707070909080a0c140d0c0b0b0c1912130f141d"
    "1a1f1e1d1a1c1c20242e2720222c231c1c2837292c30313434341f27393d38323c2e333432ffc0000b080002000201011100ffc4"
    "001f0000010501010101010100000000000000000102030405060708090a0bffc400b5100002010303020403050504040000017d"
    "01020300041105122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435"
    "363738393a434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a92939495969798"
    "999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4"
    "f5f6f7f8f9faffda0008010100003f00fbfcffd9"
)


def jpeg(extra: int = 0) -> bytes:
    """A tiny valid JPEG; ``extra`` bytes of a comment segment (COM) make it that much larger
    (a 1 MB photo for a benchmark) while it stays a valid file."""
    if extra <= 0:
        return _JPEG
    comments = bytearray()
    left = extra
    while left > 0:
        chunk = min(left, 65533)
        comments += b"\xff\xfe" + struct.pack(">H", chunk + 2) + bytes(chunk)
        left -= chunk
    return _JPEG[:2] + bytes(comments) + _JPEG[2:]


def png(width: int = 2, height: int = 2) -> bytes:
    """A small valid PNG (grey)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _pdf(objects: list[bytes]) -> bytes:
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _escape(text: str) -> bytes:
    return text.encode("latin-1", "replace").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def pdf_with_text(text: str = "Invoice 42: total 17.50 EUR") -> bytes:
    """A one-page PDF whose text layer holds ``text`` (one line per line of it), in Helvetica."""
    return pdf_pages([text])


def pdf_pages(texts: list[str]) -> bytes:
    """A PDF of one page per text, each page's text layer holding its text, in Helvetica."""
    count = len(texts)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count)),
                                                            count),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, text in enumerate(texts):
        lines = text.splitlines() or [""]
        ops = b"BT /F1 12 Tf 72 720 Td 14 TL " + b" ".join(b"(%s) Tj T*" % _escape(line) for line in lines) + b" ET"
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R"
                       b" /Resources << /Font << /F1 3 0 R >> >> >>" % (5 + 2 * i))
        objects.append(b"<< /Length %d >>\nstream\n" % len(ops) + ops + b"\nendstream")
    return _pdf(objects)


def pdf_scanned() -> bytes:
    """A one-page PDF with only a drawing on it and no text layer, as a scan without OCR is."""
    ops = b"0.5 g 72 72 468 648 re f"
    return _pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << >> >>",
        b"<< /Length %d >>\nstream\n" % len(ops) + ops + b"\nendstream",
    ])
