"""Reads commands.log (the candidate's shell log) and reports:

  no-replay-log            commands.log exists but no command in it runs the tests
                           (pytest / python -m pytest); a missing log is the
                           manifest's `missing` detector
  cinematic-infrastructure a command leaves the box: containers, clusters,
                           cloud CLIs, package installs, another host, or an
                           HTTP client aimed at anything but 127.0.0.1/localhost
                           (the platform's own gate, the `curl` lines of
                           GATEHOUSE_PIN.toml that witness a red or green run
                           or submit, excepted)

Lines may carry a shell prompt ("$ ", "> ", "user@host:~$ "), a `history`
number, or be comments (# ...), which are skipped. Commands chained with
&&, ||, ; and | are read one by one. Prints JSON lines, exits 0.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

LOG = Path("commands.log")

LEAVES_THE_BOX = {
    "docker", "docker-compose", "podman", "nerdctl", "kubectl", "k3d", "k3s", "kind", "helm",
    "minikube", "terraform", "tofu", "pulumi", "vagrant", "ansible", "ansible-playbook",
    "redis-server", "redis-cli", "minio", "mc", "celery", "rabbitmqctl", "nginx", "systemctl",
    "service", "aws", "gcloud", "az", "gsutil", "s3cmd", "ssh", "scp", "sftp", "rsync", "mosh",
    "npm", "npx", "yarn", "pnpm", "brew", "pipx", "conda", "mamba",
}
INSTALLERS = {"pip", "pip3", "apt", "apt-get", "dnf", "yum", "apk", "poetry", "uv", "pdm"}
INSTALL_WORDS = {"install", "add", "sync"}
HTTP_CLIENTS = {"curl", "wget", "http", "https", "httpie"}
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# The platform's own gate (GATEHOUSE_PIN.toml prints these curl lines):
# witnessing a red or green run and submitting are not leaving the box.
PLATFORM_GATE = re.compile(r"^/api/v1/(witness/(red|green)|submissions)/?$")
PROMPT = re.compile(r"^\s*(\d+\s+|[\w.@-]*[:~/\w.-]*[$#>]\s+|[$#>]\s+)")


def emit(fid: str, evidence: str) -> None:
    print(json.dumps({"id": fid, "evidence": evidence}))


def commands(line: str) -> list[list[str]]:
    out = []
    for piece in re.split(r"&&|\|\||;|\|", line):
        try:
            words = shlex.split(piece, comments=True)
        except ValueError:
            words = piece.split()
        while words and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]) or words[0] in {"sudo", "time", "env", "exec", "nohup"}):
            words = words[1:]
        if words:
            out.append(words)
    return out


def is_python(word: str) -> bool:
    return re.fullmatch(r"python(\d+(\.\d+)?)?", Path(word).name) is not None


def runs_tests(words: list[str]) -> bool:
    head = Path(words[0]).name
    if head in {"pytest", "py.test"}:
        return True
    if is_python(words[0]) and "-m" in words:
        i = words.index("-m")
        return i + 1 < len(words) and words[i + 1] in {"pytest", "py.test"}
    return False


def leaves_the_box(words: list[str]) -> str | None:
    head = Path(words[0]).name
    args = words[1:]
    if is_python(words[0]) and len(words) > 2 and words[1] == "-m" and words[2] in {"pip", "venv", "ensurepip"}:
        head, args = words[2], words[3:]
        if head != "pip":
            return None
    if head in LEAVES_THE_BOX:
        return head
    if head in INSTALLERS and any(a in INSTALL_WORDS for a in args[:2]):
        return f"{head} {next(a for a in args[:2] if a in INSTALL_WORDS)}"
    if head in HTTP_CLIENTS:
        urls = [a for a in args if "://" in a or re.match(r"^[\w.-]+\.[a-z]{2,}(/|:|$)", a)]
        for url in urls:
            rest = re.sub(r"^[a-z]+://", "", url)
            host, path = rest.split("/")[0], "/" + rest.split("/", 1)[1] if "/" in rest else "/"
            if PLATFORM_GATE.match(path.split("?")[0]):
                continue
            if not host.startswith(LOCAL_HOSTS):
                return f"{head} {url}"
    return None


def main() -> None:
    if not LOG.is_file():
        return
    ran_tests = False
    for number, raw in enumerate(LOG.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = PROMPT.sub("", line, count=1)
        for words in commands(line):
            if runs_tests(words):
                ran_tests = True
            what = leaves_the_box(words)
            if what:
                emit("cinematic-infrastructure", f"commands.log line {number}: {raw.strip()[:160]} ({what} leaves the shared box)")
    if not ran_tests:
        emit("no-replay-log", "commands.log never runs the tests (no pytest or python -m pytest command)")


if __name__ == "__main__":
    main()
