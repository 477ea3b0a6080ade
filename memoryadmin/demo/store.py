"""Demo long-term memories for `manage.py demo_data`: written through the store's services.

Profiles, preferences and learned facts of alice and bob under the namespaces an
agent would use (users/<id>/preferences, learned device facts,
travel_assistant/<id>/preferences; docs/store.md, "Demo data"), a few hundred items
in all, some with a TTL. Running it again rewrites the same items (puts are upserts).
"""

from __future__ import annotations

from store_app.services import store_item_put

PREFERENCES = {
    "alice": {
        "language": {"language": "zh-CN", "fallback": "en"},
        "theme": {"theme": "dark", "contrast": "high"},
        "timezone": {"timezone": "Asia/Shanghai"},
        "units": {"system": "metric", "temperature": "celsius"},
        "notifications": {"email": False, "push": True, "quiet_hours": "22:00-07:00"},
        "diet": {"text": "vegetarian, no peanuts", "confidence": 0.95},
        "reply_style": {"text": "short answers with bullet points", "confidence": 0.8},
        "coffee": {"text": "oat milk flat white, no sugar", "confidence": 0.7},
    },
    "bob": {
        "language": {"language": "en-GB"},
        "theme": {"theme": "light", "contrast": "normal"},
        "timezone": {"timezone": "Europe/London"},
        "units": {"system": "imperial", "temperature": "fahrenheit"},
        "notifications": {"email": True, "push": False},
        "diet": {"text": "no shellfish", "confidence": 0.9},
        "reply_style": {"text": "detailed explanations with sources", "confidence": 0.75},
        "tea": {"text": "strong black tea with milk", "confidence": 0.85},
    },
}

PROFILES = {
    "alice": {"name": {"text": "Alice Zhang"}, "role": {"text": "data engineer"}, "company": {"text": "Acme Analytics", "size": 120}},
    "bob": {"name": {"text": "Bob Carter"}, "role": {"text": "product manager"}, "company": {"text": "Northwind Travel", "size": 40}},
}

TOPICS = [
    ("travel", "prefers window seats on flights longer than {n} hours"),
    ("travel", "likes hotels within {n} minutes' walk of a metro station"),
    ("work", "reviews pull requests in the morning, {n} at a time"),
    ("work", "runs the weekly data pipeline report on day {n} of the sprint"),
    ("food", "ordered dumplings {n} times last month"),
    ("health", "walks about {n} thousand steps a day"),
    ("reading", "finished {n} books on distributed systems this year"),
    ("music", "listens to jazz while coding, about {n} hours a week"),
    ("devices", "charges the laptop to {n}0 percent to protect the battery"),
    ("family", "calls parents every {n} days"),
]

TRAVEL = {
    "seat": "aisle seat on short flights, window seat on long ones",
    "walking": "avoid long walks; at most 20 minutes between stops",
    "pace": "two sights a day, long lunches",
    "budget": "mid-range hotels, splurge on food",
    "osaka": "wants to see Dotonbori at night and eat takoyaki",
}


def _facts(name: str, count: int):
    for index in range(count):
        kind, template = TOPICS[index % len(TOPICS)]
        n = 2 + (index * 7) % 11
        yield f"fact-{index:03d}", {
            "text": template.format(n=n),
            "kind": kind,
            "confidence": round(0.5 + ((index * 13) % 50) / 100, 2),
            "mentions": 1 + (index * 5) % 9,
            "source_thread_id": f"{name}-chat-{index // 10:02d}",
        }


def load(users) -> dict[str, int]:
    written = 0
    with_ttl = 0
    for name in ("alice", "bob"):
        user = users[name]
        for key, value in PREFERENCES[name].items():
            store_item_put(actor=user, namespace=["users", name, "preferences"], key=key, value=value)
            written += 1
        for key, value in PROFILES[name].items():
            store_item_put(actor=user, namespace=["users", name, "profile"], key=key, value=value)
            written += 1
        for key, value in _facts(name, 110):
            store_item_put(actor=user, namespace=["memories", name], key=key, value=value)
            written += 1
        for key, text in TRAVEL.items():
            value = {"text": text, "confidence": 0.8, "kind": "stable_preference"}
            store_item_put(actor=user, namespace=["travel_assistant", name, "preferences"], key=key, value=value)
            written += 1
        # Working notes that should not outlive the task: TTLs of an hour and a day.
        for index in range(12):
            ttl = 60 if index % 2 else 24 * 60
            value = {"text": f"scratch note {index} for the current task", "step": index}
            store_item_put(actor=user, namespace=["sessions", name, "scratch"], key=f"note-{index:02d}", value=value, ttl=ttl)
            written += 1
            with_ttl += 1
    alice = users["alice"]
    # A learned fact about a device, shared knowledge any session can look up.
    device_facts = {
        "voltage": {"text": "normal voltage range is 220V to 240V", "min": 220, "max": 240, "unit": "V"},
        "location": {"text": "installed in the server room, rack 3"},
        "firmware": {"text": "firmware 2.4.1 fixes the drift bug", "version": "2.4.1"},
    }
    for key, value in device_facts.items():
        store_item_put(actor=alice, namespace=["devices", "sensor_01"], key=key, value=value)
        written += 1
    bob = users["bob"]
    faq = {
        "refunds": {"question": "How do refunds work?", "answer": "Refunds go back to the card within 5 working days."},
        "invoices": {"question": "Where are invoices?", "answer": "Under Billing, Invoices; PDFs are kept for 7 years."},
        "plans": {"question": "Can I change plan?", "answer": "Yes, any time; the change applies from the next cycle."},
    }
    for key, value in faq.items():
        store_item_put(actor=bob, namespace=["faq", "billing"], key=key, value=value)
        written += 1
    return {"store_items": written, "with_ttl": with_ttl}
