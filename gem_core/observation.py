"""MultimodalObservation: an observation made of text and images, for vision-language agents.

Most envs observe with a plain ``str``. An env that shows a figure (``math:GeometryFigures-v0``,
``math:Geometry3K``) returns a ``MultimodalObservation(text, images)`` instead, where each image is
a PNG file's bytes: immutable, hashable, picklable across processes and byte-identical for the same
seed. ``pil_images()`` decodes them (Pillow: ``pip install 'gem-core[vision]'``).

Chat form: ``to_chat_content()`` is the content list that Hugging Face multimodal chat templates and
processors (and TRL) accept, the images first, then the text::

    [{"type": "image", "image": <PIL.Image>}, {"type": "text", "text": "Find x."}]

``to_chat_content(with_images=False)`` leaves out the decoded image (``{"type": "image"}``): enough
for a chat template to place its image placeholder when rendering text only.

Text-only consumers (the history wrappers that render text, ``ContextBudget``, a text tokenizer's
chat template) refuse a ``MultimodalObservation`` with ``TypeError`` (``text_only_error``) rather
than silently dropping its images.
"""

from __future__ import annotations

import base64
import hashlib
import io
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True, repr=False)
class MultimodalObservation:
    """Text and PNG images. Equality and ``repr`` cover the image bytes (``repr`` shows a digest)."""

    text: str
    images: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"text must be a str, got {type(self.text).__name__}")
        images = tuple(self.images)
        for image in images:
            if not isinstance(image, bytes) or not image.startswith(PNG_SIGNATURE):
                raise TypeError("images are PNG bytes: use MultimodalObservation.from_images for other forms")
        object.__setattr__(self, "images", images)

    @classmethod
    def from_images(cls, text: str, images: Iterable[Any]) -> MultimodalObservation:
        """Build from images in any form ``png_bytes`` reads (PIL images, PNG/JPEG bytes, files, dicts)."""
        return cls(text, tuple(png_bytes(image) for image in images))

    def pil_images(self) -> list[Any]:
        """The images decoded as RGB ``PIL.Image.Image`` objects."""
        from PIL import Image

        return [Image.open(io.BytesIO(data)).convert("RGB") for data in self.images]

    def image_sizes(self) -> list[tuple[int, int]]:
        """``(width, height)`` of each image, read from its PNG header."""
        return [struct.unpack(">II", data[16:24]) for data in self.images]

    def to_chat_content(self, with_images: bool = True) -> list[dict[str, Any]]:
        """The content of a chat message: one image entry per image, then the text."""
        if with_images:
            parts: list[dict[str, Any]] = [{"type": "image", "image": im} for im in self.pil_images()]
        else:
            parts = [{"type": "image"} for _ in self.images]
        return [*parts, {"type": "text", "text": self.text}]

    def to_json_dict(self) -> dict[str, Any]:
        """A JSON-safe form: ``{"text": ..., "images_png_base64": [...]}``."""
        return {"text": self.text, "images_png_base64": [base64.b64encode(im).decode() for im in self.images]}

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> MultimodalObservation:
        return cls(data["text"], tuple(base64.b64decode(im) for im in data["images_png_base64"]))

    def __repr__(self) -> str:
        images = ", ".join(
            f"png {w}x{h} sha256:{hashlib.sha256(data).hexdigest()[:16]}"
            for data, (w, h) in zip(self.images, self.image_sizes())
        )
        return f"MultimodalObservation(text={self.text!r}, images=[{images}])"


def png_bytes(image: Any) -> bytes:
    """An image as PNG bytes: a PIL image, PNG or other encoded bytes, a file path, or a Hugging Face
    ``datasets`` image dict (``{"bytes": ..., "path": ...}``). PNG bytes are returned unchanged."""
    if isinstance(image, dict):
        image = image.get("bytes") or image.get("path")
    if isinstance(image, (bytes, bytearray)) and bytes(image).startswith(PNG_SIGNATURE):
        return bytes(image)
    from PIL import Image

    if isinstance(image, (bytes, bytearray)):
        image = Image.open(io.BytesIO(image))
    elif isinstance(image, str):
        image = Image.open(image)
    if not isinstance(image, Image.Image):
        raise TypeError(f"cannot read an image from {type(image).__name__}")
    buffer = io.BytesIO()
    # No metadata chunks: the same pixels always give the same bytes.
    image.convert("RGB").save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue()


def text_only_error(consumer: str) -> TypeError:
    """The error a text-only consumer raises on a ``MultimodalObservation`` (instead of dropping images)."""
    return TypeError(
        f"{consumer} renders text only and would drop the images of a MultimodalObservation. Use the "
        "ChatMessages wrapper (content lists with image entries), or gem_adapters' ChatRenderer built "
        "from a multimodal processor (transformers.AutoProcessor) for a vision-language model."
    )
