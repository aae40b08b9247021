"""Minimal OpenAI-compatible client shared by the abort runner.

Every request goes through `ModelBudget.ask`, which counts it *before* it is
sent, so the runner's model_calls figure includes failed and retried calls.
"""
from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request


class ModelBudget:
    def __init__(self, limit: int = 4) -> None:
        self.limit = limit
        self.used = 0

    def ask(self, prompt: str, tries: int = 3) -> tuple[str | None, str]:
        """Return (reply text or None, what happened). Never raises."""
        base = os.environ.get("MODEL_BASE_URL", "").rstrip("/")
        if not base:
            return None, "no MODEL_BASE_URL"
        body = json.dumps({
            "model": os.environ.get("MODEL_NAME", "default"),
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
        }).encode()
        last = "not tried"
        for _ in range(tries):
            if self.used >= self.limit:
                return None, f"model budget of {self.limit} calls spent ({last})"
            self.used += 1
            request = urllib.request.Request(
                base + "/chat/completions", data=body, method="POST",
                headers={"Content-Type": "application/json",
                         "Authorization": "Bearer " + os.environ.get("MODEL_API_KEY", "")})
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    payload = json.loads(response.read())
                return str(payload["choices"][0]["message"]["content"]), "answered"
            except urllib.error.HTTPError as exc:
                return None, f"endpoint answered HTTP {exc.code}"
            except (urllib.error.URLError, socket.timeout, ConnectionError) as exc:
                last = f"transport error {exc.__class__.__name__}"
                continue
            except (ValueError, KeyError, IndexError, TypeError):
                return None, "endpoint reply was not a chat completion"
        return None, last
