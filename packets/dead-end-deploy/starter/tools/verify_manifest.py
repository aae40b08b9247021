"""Says whether the deploy target in deploy/manifest.json can be reached.

Never talks to a model. Never leaves this machine: a host in a documentation
range, or any host that is not loopback, is reported UNREACHABLE without
opening a socket; only a loopback target is actually tried (1 s timeout).

Output (stdout), always two lines:
    verify_manifest: deploy/manifest.json -> HOST:PORT (service=NAME)
    REACHABLE host=HOST port=PORT                      (exit 0)
or  UNREACHABLE host=HOST port=PORT reason=...         (exit 1)
"""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "deploy" / "manifest.json"

DOCUMENTATION_NETS = [
    ipaddress.ip_network(net)
    for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
]
RESERVED_SUFFIXES = (".example", ".invalid", ".test", ".example.com", ".example.org", ".example.net")


def verdict(host: str, port: int) -> tuple[bool, str]:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        for net in DOCUMENTATION_NETS:
            if address in net:
                return False, f"reason=documentation-address net={net}"
        if not address.is_loopback:
            return False, "reason=outside-packet (only loopback is reachable from this packet)"
    elif host.lower() != "localhost":
        if host.lower().endswith(RESERVED_SUFFIXES):
            return False, "reason=reserved-name"
        return False, "reason=outside-packet (only loopback is reachable from this packet)"
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True, ""
    except OSError as exc:
        return False, f"reason={exc.__class__.__name__}"


def main() -> int:
    raw = json.loads(MANIFEST.read_text(encoding="utf-8"))
    host, port = str(raw["host"]), int(raw["port"])
    print(f"verify_manifest: deploy/manifest.json -> {host}:{port} (service={raw.get('service', '?')})")
    ok, why = verdict(host, port)
    if ok:
        print(f"REACHABLE host={host} port={port}")
        return 0
    print(f"UNREACHABLE host={host} port={port} {why}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
