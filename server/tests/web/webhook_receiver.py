"""A webhook receiver that checks every delivery with the official
`standardwebhooks` package (PyPI), as a hiring team's own service would.
Started by server/tests/web/webhooks.rs:

    webhook_receiver.py --port N --secret-file F --log L [--fail-first K]

It listens on 127.0.0.1:N (0: any free port), prints `listening <port>`,
and for each POST verifies the body and headers against the secret read
from F at that moment (`whsec_...`). A delivery that does not verify is
answered 400 with the verifier's reason; one that does is answered 503 for
the first K verified deliveries, then 200. Each request is one JSON line in
L: its `webhook-id`, whether it verified, the parsed body, the status
answered."""

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--secret-file", required=True)
parser.add_argument("--log", required=True)
parser.add_argument("--fail-first", type=int, default=0)
args = parser.parse_args()
fail_left = [args.fail_first]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k: v for k, v in self.headers.items()}
        with open(args.secret_file) as f:
            secret = f.read().strip()
        entry = {"id": headers.get("webhook-id"), "timestamp": headers.get("webhook-timestamp")}
        try:
            entry["body"] = Webhook(secret).verify(body, headers)
            entry["verified"] = True
        except WebhookVerificationError as e:
            entry["verified"] = False
            entry["error"] = str(e)
        if not entry["verified"]:
            status, answer = 400, "invalid signature: " + entry["error"]
        elif fail_left[0] > 0:
            fail_left[0] -= 1
            status, answer = 503, "busy, try later"
        else:
            status, answer = 200, "ok"
        entry["answered"] = status
        with open(args.log, "a") as f:
            f.write(json.dumps(entry) + "\n")
        data = answer.encode()
        self.send_response(status)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
print(f"listening {server.server_address[1]}", flush=True)
sys.stdout.close()
server.serve_forever()
