"""What the client module prints of a Redis URL: never its password."""

from __future__ import annotations

from actors.streams.client import redacted


def test_a_printed_url_hides_the_password() -> None:
    assert redacted("redis://drover:s3cret@10.0.0.5:6379/0") == "redis://drover:***@10.0.0.5:6379/0"
    assert redacted("rediss://:pw@host/1") == "rediss://:***@host/1"
    assert redacted("unix:///tmp/r/redis.sock") == "unix:///tmp/r/redis.sock"
