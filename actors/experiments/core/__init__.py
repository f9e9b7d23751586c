"""The pure core of policy experiments: demand, capacity, policies, simulator, metrics.

No Ray, Redis or clock inside: a run is a function of its inputs and its seed."""
