"""Redis streams transport: stream names, the client, the envelope, bus operations, and the
consumer-group loop. Pure redis-py; no Ray."""

from actors.streams.bus import ClaimResult, ConsumerInfo, Entry, PendingSummary, StreamBus
from actors.streams.client import connect
from actors.streams.consumer import Delivery, GroupConsumer, Handler
from actors.streams.envelope import (
    BadMessage,
    decode_envelope,
    decode_message,
    encode_envelope,
    encode_message,
    message_type,
    registry_of,
    trace_of,
)
from actors.streams.names import BROKER_GROUP, LEADER_GROUP, WORKERS_GROUP, StreamNames

__all__ = [
    "BROKER_GROUP",
    "LEADER_GROUP",
    "WORKERS_GROUP",
    "BadMessage",
    "ClaimResult",
    "ConsumerInfo",
    "Delivery",
    "Entry",
    "GroupConsumer",
    "Handler",
    "PendingSummary",
    "StreamBus",
    "StreamNames",
    "connect",
    "decode_envelope",
    "decode_message",
    "encode_envelope",
    "encode_message",
    "message_type",
    "registry_of",
    "trace_of",
]
