"""How much conversation a model takes: its context window in tokens, as an agent sets it
(`max_context_tokens`) or as its model family has it."""

from __future__ import annotations

# By the start of the model's name, the longest first: the windows their makers publish.
FAMILIES: dict[str, int] = {
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "claude": 200_000,
    "gemini": 1_048_576,
    "llama": 128_000,
    "mistral": 128_000,
    "qwen": 128_000,
    "deepseek": 128_000,
}
CHARS_PER_TOKEN = 3  # fewer than most tokenizers average: an estimate that cuts early, not late


def window(model: str, given: int | None = None) -> int | None:
    """The tokens a request to `model` may hold: `given`, else its family's; None when unknown."""
    if given:
        return given
    name = model.rsplit("/", 1)[-1].lower()  # a gateway's `openai/gpt-4o`
    family = max((f for f in FAMILIES if name.startswith(f)), key=len, default=None)
    return FAMILIES[family] if family else None


def tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN
