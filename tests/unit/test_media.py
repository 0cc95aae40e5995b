"""Images and documents in the prompt estimate (compactctl.media, tokens.message_tokens).

Expected token counts are the worked examples of the providers' guides (Anthropic's vision
guide: 1000x1000 px ~1334 tokens, 200x200 px ~54, 1092x1092 px ~1590; OpenAI's vision guide:
1024x1024 high detail 765, 2048x4096 1105), and the image sizes are read from real files
built here with zlib and struct (PNG) or by hand (JPEG, GIF, WebP headers).
"""

from __future__ import annotations

import base64
import random
import struct
import zlib

import pytest

from compactctl.media import (
    DEFAULT_IMAGE_SIZE,
    PDF_PAGE_TOKENS,
    image_info,
    image_size,
    image_tokens,
    media_rule_for,
    media_tokens,
)
from compactctl.tokens import TokenCounter, message_tokens, messages_tokens


def png(width: int, height: int, noise: bytes = b"") -> bytes:
    """A valid RGB PNG of ``width`` x ``height`` px (black, plus ``noise`` in its first rows)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    row = width * 3
    raw = bytearray(height * (row + 1))
    raw[1 : 1 + len(noise)] = noise[: len(raw) - 1]
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(bytes(raw)))
        + chunk(b"IEND", b"")
    )


def jpeg(width: int, height: int, exif: int = 0) -> bytes:
    """A JPEG's first segments: SOI, an APP1 of ``exif`` bytes, then a baseline SOF0."""
    app1 = b"\xff\xe1" + struct.pack(">H", exif + 2) + b"E" * exif
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app1 + sof + b"\xff\xda"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("w", "h", "rule", "tokens"),
    [
        (1000, 1000, "anthropic", 1334),  # Anthropic's table: ~1334
        (200, 200, "anthropic", 54),  # ~54
        (1092, 1092, "anthropic", 1590),  # ~1590, the largest 1:1 size not scaled
        (4000, 4000, "anthropic", 1599),  # scaled down to 1.2 megapixels
        (3000, 1000, "anthropic", 1092),  # long edge scaled to 1568: 1568x522 px
        (1024, 1024, "openai", 765),  # OpenAI's example: 4 tiles
        (2048, 4096, "openai", 1105),  # OpenAI's example: 6 tiles
        (512, 512, "openai", 255),
        (300, 300, "gemini", 258),
        (1920, 1080, "gemini", 6 * 258),
    ],
)
def test_image_tokens_follow_the_providers_examples(w, h, rule, tokens):
    assert image_tokens(w, h, rule) == tokens


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="unknown image-token rule 'bing'"):
        image_tokens(10, 10, "bing")  # type: ignore[arg-type]


def test_the_rule_follows_the_provider_of_the_model():
    assert media_rule_for("gpt-4o") == media_rule_for("openai/o3-mini") == "openai"
    assert media_rule_for("gemini-2.5-flash") == "gemini"
    assert media_rule_for("claude-sonnet-4-5") == media_rule_for("llama3") == "anthropic"


def test_sizes_are_read_from_png_jpeg_gif_and_webp_headers():
    assert image_size(png(1280, 800)) == ("png", 1280, 800)
    assert image_size(jpeg(640, 480)) == ("jpeg", 640, 480)
    assert image_size(b"GIF87a" + struct.pack("<HH", 33, 44)) == ("gif", 33, 44)
    vp8x = b"RIFF\0\0\0\0WEBPVP8X" + b"\0" * 8 + (799).to_bytes(3, "little")
    assert image_size(vp8x + (599).to_bytes(3, "little")) == ("webp", 800, 600)
    bits = (1023) | (767 << 14)
    vp8l = b"RIFF\0\0\0\0WEBPVP8L" + b"\0" * 4 + b"\x2f" + bits.to_bytes(4, "little")
    assert image_size(vp8l) == ("webp", 1024, 768)
    assert image_size(b"%PDF-1.7") is None
    assert image_size(png(10, 10)[:20]) is None  # cut before the size


def test_a_jpeg_size_behind_a_large_exif_segment_is_found():
    data = b64(jpeg(3024, 4032, exif=30_000))
    info = image_info({"type": "image", "mediaType": "image/jpeg", "data": data})
    assert (info.format, info.width, info.height) == ("jpeg", 3024, 4032)
    assert info.tokens == image_tokens(3024, 4032)


def test_data_urls_and_unreadable_images():
    url = "data:image/png;base64," + b64(png(640, 480))
    assert image_info({"type": "image", "url": url}, "openai").tokens == image_tokens(
        640, 480, "openai"
    )
    remote = image_info({"type": "image", "url": "https://example.com/x.png"})
    assert (remote.width, remote.tokens) == (None, image_tokens(*DEFAULT_IMAGE_SIZE))
    junk = image_info({"type": "image", "mediaType": "image/svg+xml", "data": "PHN2Zz4="})
    assert junk.format == "svg+xml" and junk.width is None
    assert junk.placeholder() == f"[image: unknown size svg+xml, {junk.tokens} tokens, elided]"


def test_documents_count_per_pdf_page_or_by_their_text():
    pages = b"%PDF-1.4\n" + b"".join(
        b"%d 0 obj <</Type /Page /Parent 1 0 R>> endobj\n" % i for i in range(3)
    )
    pdf = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": b64(pages + b"1 0 obj <</Type /Pages>>"),
        },
    }
    assert media_tokens([pdf], "anthropic") == 3 * PDF_PAGE_TOKENS
    text = {"type": "document", "source": {"type": "text", "data": "abcd" * 10}}
    assert media_tokens([text], "anthropic", lambda t: len(t)) == 40
    assert media_tokens("a plain string", "anthropic") == 0


def test_message_tokens_add_images_to_the_text():
    counter = TokenCounter("estimate")
    image = {"type": "image", "mediaType": "image/png", "data": b64(png(1280, 800))}
    data = {"role": "tool", "content": [{"type": "text", "text": "12345678"}, image]}
    assert message_tokens(data, counter) == 2 + 1366  # 1280*800/750, rounded up
    counter.media_rule = "openai"
    assert messages_tokens([data, {"role": "user", "content": "abcd"}], counter) == [
        2 + image_tokens(1280, 800, "openai"),
        1,
    ]


def test_an_image_costs_its_rule_not_its_base64_text():
    # a 1280x800 screenshot with noise: about 6,000 chars of base64, 1,366 tokens
    noise = random.Random(15).randbytes(1500)
    data = b64(png(1280, 800, noise))
    assert 5_000 < len(data) < 8_000
    counter = TokenCounter("estimate")
    shot = {"role": "tool", "content": [{"type": "image", "mediaType": "image/png", "data": data}]}
    assert message_tokens(shot, counter) == 1366
