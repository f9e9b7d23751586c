"""The worker's pure core: Nomad's schedulers (service, batch, system) with no Ray or Redis."""
