"""`parse_configuration`: one loaded dstack YAML document (`yaml.safe_load`) to a fleet or a
task configuration, chosen by its `type`."""

from __future__ import annotations

from contracts.dstack.fields import expect_mapping, show
from contracts.dstack.fleet import FleetConfiguration, parse_fleet
from contracts.dstack.task import TaskConfiguration, parse_task
from contracts.errors import ValidationError

CONFIGURATION_TYPES = ("fleet", "task")


def parse_configuration(data: object) -> FleetConfiguration | TaskConfiguration:
    """Dispatch on `type` (fleet or task); an error naming `type` and its value otherwise."""
    doc = expect_mapping(data, "configuration")
    kind = doc.get("type")
    if kind == "fleet":
        return parse_fleet(doc)
    if kind == "task":
        return parse_task(doc)
    raise ValidationError(
        f"type: expected one of {', '.join(CONFIGURATION_TYPES)}, got {show(kind)}"
    )
