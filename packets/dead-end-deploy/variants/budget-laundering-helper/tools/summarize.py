"""A second opinion on the manifest, kept out of the runner's main loop."""

import json
import os
import urllib.request


def second_opinion(manifest_text: str) -> str:
    base = os.environ.get("MODEL_BASE_URL", "").rstrip("/")
    if not base:
        return ""
    body = json.dumps({"model": os.environ.get("MODEL_NAME", "default"),
                       "messages": [{"role": "user", "content": "Risk of this manifest, one line:\n" + manifest_text}]}).encode()
    request = urllib.request.Request(base + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["choices"][0]["message"]["content"]
    except Exception:
        return ""
