"""The client agent: runs allocations on its nodes and reports their status to the leader.

Like Nomad's client, it watches the allocations placed on its nodes, starts their tasks
through task drivers and sends client-status updates back. The actor shell is a thin Ray
wrapper around `actors.agent.core`, which has no Ray or Redis imports.
"""
