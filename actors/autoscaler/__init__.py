"""The autoscaler: evaluates Nomad Autoscaler scaling policies and scales job groups and fleets."""
