"""Images and documents in the prompt: their size in tokens, by the providers' published rules.

A model does not read an image's base64 text: the provider bills (and fills the context
window with) a number of tokens derived from the image's pixel size. compactctl counts an
image part (``{"type": "image", "mediaType", "data"}`` or ``{"type": "image", "url"}``) by
the rule of the session's provider (:func:`media_rule_for`), never by its characters:

- ``anthropic`` (Anthropic's vision guide, "Calculate image costs"):
  ``tokens = width * height / 750``, after the image is scaled down (aspect ratio kept) so
  that its long edge is at most 1568 px and it is at most about 1,600 tokens (1.2 megapixels;
  the guide's largest sizes, e.g. 1092x1092 px, are about 1,590 tokens). Rounded up.
- ``openai`` (OpenAI's vision guide, "Calculating costs", ``detail: high``, the default for
  images of a coding agent): scale to fit a 2048x2048 square, then so that the shortest side
  is at most 768 px; ``tokens = 85 + 170 * tiles``, ``tiles`` the 512 px squares covering it.
- ``gemini`` (Gemini API documentation, token counting): both sides at most 384 px: 258
  tokens; else 258 tokens per 768x768 tile covering the image.

Pixel sizes come from the image's own header, decoded from the first base64 characters
(:func:`image_size`: PNG, JPEG, GIF, WebP). An image whose size cannot be read (a URL, a
truncated or unknown format) counts as :data:`DEFAULT_IMAGE_SIZE`, a full-HD screenshot.

Documents (Anthropic ``document`` parts, kept opaque by the importers): a base64 PDF counts
:data:`PDF_PAGE_TOKENS` per page (Anthropic's PDF support guide: each page is given as its
extracted text, "typically 1,500-3,000 tokens per page", plus the page as an image; we take
the low end of the text and the image cap of the ``anthropic`` rule); a text document counts
its text. Other opaque parts (thinking signatures, encrypted reasoning) count nothing.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "DEFAULT_IMAGE_SIZE",
    "MEDIA_RULES",
    "PDF_PAGE_TOKENS",
    "ImageInfo",
    "MediaRule",
    "image_info",
    "image_size",
    "image_tokens",
    "media_rule_for",
    "media_tokens",
    "pdf_pages",
]

MediaRule = Literal["anthropic", "openai", "gemini"]
"""The providers whose image-token rule compactctl applies (see the module docstring)."""

MEDIA_RULES: tuple[MediaRule, ...] = ("anthropic", "openai", "gemini")

DEFAULT_IMAGE_SIZE = (1920, 1080)
"""Pixel size (width, height) assumed for an image whose header cannot be read: a full-HD
screen, the usual size of an agent's screenshot. Under the ``anthropic`` rule it is capped at
about 1,600 tokens, the most any image costs there."""

ANTHROPIC_MAX_EDGE = 1568
"""Anthropic's vision guide: an image whose long edge is longer is scaled down first (px)."""

ANTHROPIC_MAX_PIXELS = 1_200_000
"""Anthropic's vision guide: an image of more than about 1,600 tokens is scaled down first;
1,600 tokens * 750 px per token = 1.2 megapixels."""

PDF_PAGE_TOKENS = 1_500 + 1_600
"""Tokens counted per PDF page: 1,500 for its extracted text (the low end of Anthropic's
"1,500-3,000 tokens per page") plus 1,600 for the page image (a page rendered at the
``anthropic`` rule's size cap)."""

HEADER_CHARS = (64, 4096, 65536, 1 << 20)
"""Base64 characters decoded, in turn, to find an image's size: PNG, GIF and WebP headers
lie in the first 64; a JPEG's frame header (SOF) follows its EXIF and ICC segments, which
can take up to about 64 KiB each, so the search widens until it is found (at most 1 Mi
characters, 768 KiB of image)."""

_OPENAI_PREFIXES = ("gpt-", "chatgpt-", "o1", "o3", "o4", "codex-", "computer-use")


def media_rule_for(model: str | None) -> MediaRule:
    """The image-token rule of a model's provider, by its name.

    ``openai`` for gpt-*, chatgpt-*, codex-* and the o-series, ``gemini`` for gemini-*,
    ``anthropic`` for every other model, including unknown ones and ``None``: of the three,
    it gives a screenshot the most tokens, so an unknown model's context fills early rather
    than late. A provider prefix (``openai/gpt-4o``) is ignored.

    >>> media_rule_for("openai/gpt-4o"), media_rule_for("gemini-2.5-pro"), media_rule_for(None)
    ('openai', 'gemini', 'anthropic')
    """
    name = (model or "").rsplit("/", 1)[-1].lower()
    if name.startswith(_OPENAI_PREFIXES):
        return "openai"
    if name.startswith("gemini"):
        return "gemini"
    return "anthropic"


def image_tokens(width: int, height: int, rule: MediaRule = "anthropic") -> int:
    """Tokens of a ``width`` x ``height`` px image under a provider's rule (module docstring).

    Raises:
        ValueError: ``rule`` is not one of :data:`MEDIA_RULES`.

    >>> image_tokens(1000, 1000), image_tokens(200, 200), image_tokens(4000, 3000)
    (1334, 54, 1598)
    >>> image_tokens(1024, 1024, "openai"), image_tokens(2048, 4096, "openai")
    (765, 1105)
    >>> image_tokens(384, 300, "gemini"), image_tokens(1920, 1080, "gemini")
    (258, 1548)
    """
    w, h = max(1, width), max(1, height)
    if rule == "anthropic":
        scale = min(1.0, ANTHROPIC_MAX_EDGE / max(w, h), math.sqrt(ANTHROPIC_MAX_PIXELS / (w * h)))
        if scale < 1.0:
            w, h = _scaled(w, scale), _scaled(h, scale)
        return math.ceil(w * h / 750)
    if rule == "openai":
        if max(w, h) > 2048:
            scale = 2048 / max(w, h)
            w, h = _scaled(w, scale), _scaled(h, scale)
        if min(w, h) > 768:
            scale = 768 / min(w, h)
            w, h = _scaled(w, scale), _scaled(h, scale)
        return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)
    if rule == "gemini":
        if w <= 384 and h <= 384:
            return 258
        return 258 * math.ceil(w / 768) * math.ceil(h / 768)
    raise ValueError(f"unknown image-token rule {rule!r}; expected one of {MEDIA_RULES}")


def _scaled(side: int, scale: float) -> int:
    """``side * scale`` rounded down, at least 1 px (``1e-9`` absorbs float error: 3000 px
    scaled by 1568/3000 is 1568 px, not 1567)."""
    return max(1, int(side * scale + 1e-9))


def image_size(head: bytes) -> tuple[str, int, int] | None:
    """``(format, width, height)`` read from the first bytes of a PNG, JPEG, GIF or WebP file,
    or ``None`` when they are not one of those or stop before the size.

    >>> png = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + (640).to_bytes(4, "big")
    >>> image_size(png + (480).to_bytes(4, "big"))
    ('png', 640, 480)
    >>> image_size(b"GIF89a\\x10\\x00\\x20\\x00"), image_size(b"not an image")
    (('gif', 16, 32), None)
    """
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24 and head[12:16] == b"IHDR":
        w, h = struct.unpack(">II", head[16:24])
        return "png", w, h
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        w, h = struct.unpack("<HH", head[6:10])
        return "gif", w, h
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp_size(head)
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(head)
    return None


def _webp_size(head: bytes) -> tuple[str, int, int] | None:
    """The size in a WebP header (lossy ``VP8 ``, lossless ``VP8L``, extended ``VP8X``)."""
    chunk = head[12:16]
    if chunk == b"VP8 " and len(head) >= 30:
        w, h = struct.unpack("<HH", head[26:30])
        return "webp", w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and len(head) >= 25:
        bits = int.from_bytes(head[21:25], "little")
        return "webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(head) >= 30:
        w = int.from_bytes(head[24:27], "little") + 1
        h = int.from_bytes(head[27:30], "little") + 1
        return "webp", w, h
    return None


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""JPEG start-of-frame markers (baseline, progressive, lossless...; not DHT, JPG, DAC)."""


def _jpeg_size(head: bytes) -> tuple[str, int, int] | None:
    """The size in a JPEG's first start-of-frame segment, walking the segments before it."""
    i, n = 2, len(head)
    while i + 4 <= n:
        if head[i] != 0xFF:
            return None
        marker = head[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # no length
            i += 2
            continue
        if marker in _SOF:
            if i + 9 > n:
                return None
            h, w = struct.unpack(">HH", head[i + 5 : i + 9])
            return "jpeg", w, h
        i += 2 + int.from_bytes(head[i + 2 : i + 4], "big")
    return None


def _b64_prefix(data: str, chars: int) -> bytes:
    """The bytes of the first ``chars`` base64 characters of ``data`` (whitespace skipped;
    standard or URL-safe alphabet), ``b""`` when they are not base64."""
    piece = data[: chars + chars // 16]  # room for line breaks
    if not piece.isascii():
        return b""
    piece = "".join(piece.split())[:chars]
    piece = piece[: len(piece) // 4 * 4]
    try:
        return base64.b64decode(piece.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return b""


@dataclass(frozen=True)
class ImageInfo:
    """What an image part is, as counted and shown in a placeholder.

    Attributes:
        format: ``png``, ``jpeg``, ``gif``, ``webp`` from the header, else the subtype of
            the part's media type (``image/svg+xml`` -> ``svg+xml``), else ``image``.
        width, height: pixels, or ``None`` when the header could not be read.
        tokens: the tokens it counts (:func:`image_tokens`, or of
            :data:`DEFAULT_IMAGE_SIZE` when the size is unknown).
    """

    format: str
    width: int | None
    height: int | None
    tokens: int

    def placeholder(self) -> str:
        """The text that stands for the image once micro compaction elides it.

        >>> ImageInfo("png", 1280, 800, 1366).placeholder()
        '[image: 1280x800 png, 1366 tokens, elided]'
        >>> ImageInfo("image", None, None, 1600).placeholder()
        '[image: unknown size image, 1600 tokens, elided]'
        """
        size = f"{self.width}x{self.height}" if self.width is not None else "unknown size"
        return f"[image: {size} {self.format}, {self.tokens} tokens, elided]"


def _image_data(part: Mapping[str, Any]) -> tuple[str | None, str]:
    """``(base64 data or None, media type)`` of an image part (a ``data:`` URL included)."""
    media = part.get("mediaType")
    media = media if isinstance(media, str) else ""
    data = part.get("data")
    if isinstance(data, str):
        return data, media
    url = part.get("url")
    if isinstance(url, str) and url.startswith("data:") and "," in url:
        meta, _, payload = url.partition(",")
        if meta.endswith(";base64"):
            return payload, media or meta[5:].split(";", 1)[0]
    return None, media


def image_info(part: Mapping[str, Any], rule: MediaRule = "anthropic") -> ImageInfo:
    """The :class:`ImageInfo` of an image part under ``rule``.

    >>> image_info({"type": "image", "url": "https://example.com/a.png"}).tokens
    1599
    """
    data, media = _image_data(part)
    found = None
    if data:
        for chars in HEADER_CHARS:
            found = image_size(_b64_prefix(data, chars))
            if found is not None or len(data) <= chars:
                break
    if found is not None:
        fmt, w, h = found
        return ImageInfo(fmt, w, h, image_tokens(w, h, rule))
    fmt = media.split("/", 1)[1] if media.startswith("image/") and "/" in media else "image"
    return ImageInfo(fmt, None, None, image_tokens(*DEFAULT_IMAGE_SIZE, rule))


_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")


def pdf_pages(data: bytes) -> int:
    """Pages of a PDF: its ``/Type /Page`` objects, at least 1 (a PDF whose page objects sit
    in compressed object streams shows none in its bytes, and counts as one page).

    >>> pdf_pages(b"%PDF-1.7 1 0 obj <</Type /Pages>> 2 0 obj <</Type/Page>> 3 0 obj "
    ...           b"<</Type /Page /Parent 1 0 R>>")
    2
    """
    return max(1, len(_PDF_PAGE.findall(data)))


def _document_tokens(part: Mapping[str, Any], count_text: Callable[[str], int]) -> int:
    source = part.get("source")
    if not isinstance(source, Mapping):
        return 0
    kind = source.get("type")
    data = source.get("data")
    if kind == "text" and isinstance(data, str):
        return count_text(data)
    if kind == "content" and isinstance(source.get("content"), list):
        texts = [
            b["text"]
            for b in source["content"]
            if isinstance(b, Mapping) and isinstance(b.get("text"), str)
        ]
        return count_text("\n".join(texts))
    if kind == "base64" and isinstance(data, str):
        try:
            raw = base64.b64decode(data)
        except (binascii.Error, ValueError):
            return PDF_PAGE_TOKENS
        return PDF_PAGE_TOKENS * pdf_pages(raw)
    return PDF_PAGE_TOKENS  # a URL or a file id: one page, as nothing says more


def media_tokens(
    content: Any, rule: MediaRule, count_text: Callable[[str], int] | None = None
) -> int:
    """Tokens of the images and documents in a message's ``content`` (0 for a string).

    Args:
        content: the message's ``content`` (a string or a list of parts).
        rule: the provider's image rule (:func:`media_rule_for`).
        count_text: counts a text document's text (default: 4 chars a token).

    >>> png = "iVBORw0KGgoAAAANSUhEUgAABQAAAAMgCAIAAAA="  # a 1280x800 PNG header
    >>> media_tokens([{"type": "text", "text": "see"},
    ...               {"type": "image", "mediaType": "image/png", "data": png}], "anthropic")
    1366
    """
    if not isinstance(content, list):
        return 0
    total = 0
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "image":
            total += image_info(part, rule).tokens
        elif kind == "document":
            total += _document_tokens(part, count_text or (lambda t: (len(t) + 3) // 4))
    return total
