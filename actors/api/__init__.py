"""The Nomad-compatible HTTP API (`/v1/...`), served by the `drover agent` process."""
