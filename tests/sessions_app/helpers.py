from __future__ import annotations


def turns(count: int, prefix: str = "m") -> list[dict]:
    """`count` alternating user/assistant messages."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{prefix} {i}", "id": f"{prefix}-{i}"}
        for i in range(count)
    ]
