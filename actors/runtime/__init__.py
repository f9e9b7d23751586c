"""Runtime pieces shared by the actor shells (they touch Redis, so they are not pure cores)."""
