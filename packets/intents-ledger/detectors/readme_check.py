"""readme-fiction: does README.md describe the service that exists?

Fires when README.md is missing or empty, or when a line claims something
this service does not have and may not have: containers, caches, databases,
queues, metrics, auth, config files, package installs, or a route other than
POST /v1/intents and GET /healthz. Lines that deny a thing ("no Redis",
"without Docker", "out of scope") are not claims, and a "worker thread" (how
http.server handles a request) is no worker service. A first pass for the
reviewer; the criterion is auto-override.
"""

import json
import re
from pathlib import Path

CLAIMS = re.compile(
    r"(?i)\b(docker|compose|kubernetes|k8s|helm|redis|memcached?|postgres\w*|mysql|mongo\w*|sqlite|"
    r"kafka|rabbitmq|celery|queue|workers?(?![ -]threads?\b)|prometheus|grafana|metrics|opentelemetry|jwt|oauth|api[- ]?keys?|"
    r"bearer|\.env\b|dotenv|pip install|requirements\.txt|poetry|makefile|make run|openapi|swagger)"
)
NEGATION = re.compile(
    r"(?i)\b(no|not|never|nor|none|without|instead of|rather than|out of scope|forbidden|avoid\w*|deliberately)\b|n't\b"
)
ROUTE = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE)\s+`?(/[^\s`]*)")
ALLOWED_ROUTES = {("POST", "/v1/intents"), ("GET", "/healthz")}


def emit(evidence):
    print(json.dumps({"id": "readme-fiction", "evidence": evidence, "provenance": "claimed"}))


def main():
    path = Path("README.md")
    if not path.exists() or not path.read_text(encoding="utf-8", errors="replace").strip():
        emit("README.md is missing or empty")
        return
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        claim = CLAIMS.search(line)
        if claim and not NEGATION.search(line):
            emit("README.md:%d claims %r: %s" % (n, claim.group(0), line.strip()[:160]))
            return
        for method, route in ROUTE.findall(line):
            if (method.upper(), route.rstrip("/").split("?")[0]) not in ALLOWED_ROUTES:
                emit("README.md:%d documents a route the brief does not have: %s %s" % (n, method, route))
                return


if __name__ == "__main__":
    main()
