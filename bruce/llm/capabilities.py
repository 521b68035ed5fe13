"""What a model can take, from litellm's own capability data (its model map, read locally)."""

from __future__ import annotations

import structlog

from bruce.llm.service import load_litellm

__all__ = ["supports_vision"]

log = structlog.get_logger(__name__)


def supports_vision(model: str) -> bool:
    """Whether ``model`` (``provider/name``, as in ``llm.model``) takes images, by litellm's data;
    False for a model litellm does not know (``media.vision: true`` says otherwise)."""
    litellm = load_litellm()
    try:
        return bool(litellm.supports_vision(model=model))
    except Exception as exc:  # an unknown provider or model: litellm raises for some
        log.info("llm.vision_unknown", model=model, error=str(exc)[:200])
        return False
