"""The eval broker: Nomad's ready queues, per-job serialisation and blocked-eval tracker."""
