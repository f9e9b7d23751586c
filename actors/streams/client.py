"""The one way drover opens a Redis client, with redis-py 8's defaults undone.

redis-py 8 gives every client a 5 s socket timeout and a built-in Retry of 10 attempts
(ecosystem notes 2.1). Both are wrong for stream consumers: an `XREADGROUP ... BLOCK` longer
than 5 s raised TimeoutError after ~57 s (10 x 5 s), a timed-out `>` read may already have
been delivered server-side (the entry then sits in the PEL), and a tenacity layer on top of the
built-in retry multiplies attempts. So: no read timeout (blocking reads are bounded by their
BLOCK argument), no built-in retry (callers own retrying, with tenacity, and only for
idempotent commands), no health checks.

The client is thread-safe: each command borrows a connection from the client's pool, so one
client may be shared by the threads of a process (a blocking read holds its connection for the
duration of the block). Pipelines are not: create one per use.
"""

from __future__ import annotations

import urllib.parse

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

# RESP2 on the wire and in the Python reply shapes, whatever redis-py's default becomes; the
# streams code also accepts the RESP3 shapes.
PROTOCOL = 2


def connect(
    url: str, *, client_name: str | None = None, connect_timeout: float = 5.0
) -> redis.Redis:
    """A sync client for `unix:///path/redis.sock` or `redis://host:port/db` URLs.

    Replies are bytes (`decode_responses=False`): message bodies are orjson bytes.
    `connect_timeout` bounds establishing a connection only, never a read.
    """
    return redis.Redis.from_url(
        url,
        decode_responses=False,
        socket_timeout=None,
        socket_connect_timeout=connect_timeout,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
        protocol=PROTOCOL,
        client_name=client_name,
    )


def redacted(url: str) -> str:
    """`url` with its password replaced by `***`, for what is printed or logged."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{user}:***@{host}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
