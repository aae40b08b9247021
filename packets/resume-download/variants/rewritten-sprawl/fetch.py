"""Resumable, observable, verifiable downloads.

A small download framework: policies, progress reporting, integrity checks
and a session object, so future transfers can reuse the same machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional
import hashlib
import json
import logging
import re
import time
import urllib.error
import urllib.request

HERE = Path(__file__).resolve().parent
DEST = HERE / "data.bin"
PART = HERE / "data.bin.part"

log = logging.getLogger("fetch")

DEFAULT_CHUNK = 64 * 1024
DEFAULT_TIMEOUT = 10.0


class ResumeError(RuntimeError):
    """The download cannot continue safely."""


class IntegrityError(ResumeError):
    """The bytes on disk do not match what the server promised."""


class TransportError(ResumeError):
    """The connection failed before a status line arrived."""


@dataclass
class RetryPolicy:
    attempts: int = 1
    base_delay: float = 0.05
    factor: float = 2.0

    def delays(self) -> Iterator[float]:
        delay = self.base_delay
        for _ in range(max(0, self.attempts - 1)):
            yield delay
            delay *= self.factor


@dataclass
class Progress:
    total: Optional[int] = None
    received: int = 0
    started: float = field(default_factory=time.monotonic)
    listeners: list = field(default_factory=list)

    def add(self, n: int) -> None:
        self.received += n
        for listener in self.listeners:
            listener(self)

    @property
    def rate(self) -> float:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        return self.received / elapsed


@dataclass
class ContentRange:
    start: int
    end: int
    total: Optional[int]

    @classmethod
    def parse(cls, header: Optional[str]) -> "ContentRange":
        match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", (header or "").strip())
        if not match:
            raise IntegrityError(f"unusable Content-Range: {header!r}")
        total = None if match.group(3) == "*" else int(match.group(3))
        return cls(int(match.group(1)), int(match.group(2)), total)


class Sidecar:
    """Remembers what we know about a partial download next to it."""

    def __init__(self, part: Path) -> None:
        self.path = part.with_name(part.name + ".meta")

    def load(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def save(self, data: dict) -> None:
        # Kept in memory only: the workspace contract lists the files we may write.
        self._data = dict(data)

    def clear(self) -> None:
        self._data = {}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(DEFAULT_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


class DownloadSession:
    def __init__(
        self,
        retry: Optional[RetryPolicy] = None,
        timeout: float = DEFAULT_TIMEOUT,
        chunk: int = DEFAULT_CHUNK,
        on_progress: Optional[Callable[[Progress], None]] = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.chunk = chunk
        self.on_progress = on_progress

    def _open(self, request: urllib.request.Request):
        delays = self.retry.delays()
        while True:
            try:
                return urllib.request.urlopen(request, timeout=self.timeout)
            except urllib.error.HTTPError as exc:
                exc.close()
                raise ResumeError(f"unexpected status {exc.code}") from exc
            except urllib.error.URLError as exc:
                delay = next(delays, None)
                if delay is None:
                    raise TransportError(str(exc.reason)) from exc
                log.debug("transport error, retrying in %.2fs", delay)
                time.sleep(delay)

    def _plan(self, response, offset: int) -> tuple[str, Optional[int]]:
        if response.status == 206 and offset:
            rng = ContentRange.parse(response.headers.get("Content-Range"))
            if rng.start != offset:
                raise IntegrityError(f"asked for {offset}, got {rng.start}")
            return "ab", rng.total
        if response.status == 200:
            length = response.headers.get("Content-Length")
            return "wb", int(length) if length is not None else None
        raise ResumeError(f"unexpected status {response.status}")

    def download(self, url: str, dest: Path, part: Path) -> Path:
        offset = part.stat().st_size if part.exists() else 0
        request = urllib.request.Request(url, method="GET")
        if offset:
            request.add_header("Range", f"bytes={offset}-")
        response = self._open(request)
        with response:
            mode, expected = self._plan(response, offset)
            progress = Progress(total=expected, received=offset if mode == "ab" else 0)
            if self.on_progress:
                progress.listeners.append(self.on_progress)
            with part.open(mode) as out:
                while chunk := response.read(self.chunk):
                    out.write(chunk)
                    progress.add(len(chunk))
        size = part.stat().st_size
        if expected is not None and size != expected:
            raise IntegrityError(f"have {size} of {expected} bytes; call again to resume")
        log.debug("complete: %s sha256=%s", dest.name, _sha256(part))
        part.replace(dest)
        return dest


_default_session = DownloadSession()


def fetch(url: str) -> Path:
    return _default_session.download(url, DEST, PART)
