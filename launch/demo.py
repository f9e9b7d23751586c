"""`drover demo`: the whole system on the embedded defaults, driven through its HTTP API.

It starts the agent (embedded Redis, a local Ray, several scheduler workers, the API on a free
loopback port), declares simulated fleets (`examples/fleets/*.yaml`), submits the example
jobs plus a crowd of copies all at once — the workers plan in parallel on their own replicas,
so the leader partially rejects plans that claimed the same capacity and the workers refresh
and retry — then walks the job lifecycle: an autoscaler scale-up, `job run` with and without
-preserve-counts, and stop -> revert with correct version statuses (Nomad #24957) — and a
real autoscaler loop: a mock service whose demand spikes is scaled up by its Nomad Autoscaler
policy, cools down, is scaled back down, and `drover scaling policy explain` says why. It
prints what happened and stops everything it started.
"""

from __future__ import annotations

import shutil
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
import yaml

from actors.api.core.shapes import job_to_nomad
from contracts.jobspec import parse_job_file
from launch.cli.client import ApiClient, segment
from launch.cli.output import table
from launch.cli.scaling import explain_decision
from launch.system import DroverSystem, SystemConfig

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CROWD = 6  # extra copies of the web job, submitted with the examples to make plans collide
AUTOSCALED = EXAMPLES / "autoscale.nomad"  # step 5's own job: its load spikes once it runs


def run_demo(
    nodes: int = 40,
    workers: int = 4,
    seed: int = 1,
    *,
    on_started: Callable[[DroverSystem], None] | None = None,
) -> int:
    """`nodes` scales the std fleets; `seed` is kept for CLI compatibility (job IDs are
    random UUIDs in the running system). `on_started` sees the system once it is up (tests
    record what it started, to check that all of it stopped)."""
    data_dir = Path(tempfile.mkdtemp(prefix="drover-demo-"))
    started = time.monotonic()
    system = DroverSystem(
        SystemConfig(
            data_dir=data_dir,
            workers=workers,
            num_cpus=max(2, workers),
            http_addr="127.0.0.1:0",
            heartbeat_ttl_s=30.0,
        )
    )
    try:
        system.start()
        if on_started is not None:
            on_started(system)
        api = ApiClient(system.http_address, token="")
        print(
            f"drover demo: agent up in {time.monotonic() - started:.1f}s "
            f"(API {system.http_address}, {len(system.workers)} scheduler workers, "
            "embedded Redis, local Ray)\n"
        )
        _declare_fleets(api, nodes)
        jobs = _submit_examples(api)
        _wait_settled(api, jobs)
        _report_placements(api, system, jobs)
        _lifecycle(api)
        _autoscaler_loop(api)
        print()
        _print_status(api)
    finally:
        system.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    print(
        f"\ndemo finished in {time.monotonic() - started:.1f}s; everything it started is stopped."
    )
    return 0


def _declare_fleets(api: ApiClient, nodes: int) -> None:
    print("1. drover fleet apply examples/fleets/*.yaml")
    per_dc = max(2, (nodes - 4) // 2)
    for path in sorted((EXAMPLES / "fleets").glob("*.yaml")):
        declared: dict[str, Any] = yaml.safe_load(path.read_text())
        if declared.get("node_class") == "std":
            declared["nodes"] = per_dc
        reply = api.post("/v1/fleets", {"Fleet": declared})
        print(f'   fleet "{reply["Name"]}": {reply["Nodes"]} nodes')
    print()


def _submit_examples(api: ApiClient) -> list[str]:
    paths = sorted(p for p in EXAMPLES.glob("*.nomad") if p.name != AUTOSCALED.name)
    jobs = [job_to_nomad(parse_job_file(p)) for p in paths]
    web = next(j for j in jobs if j["ID"] == "web")
    for n in range(1, CROWD + 1):
        jobs.append({**web, "ID": f"web-{n}", "Name": f"web-{n}"})
    print(f"2. {len(jobs)} jobs submitted at once (the examples plus {CROWD} copies of web)")
    threads = [threading.Thread(target=api.post, args=("/v1/jobs", {"Job": job})) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [j["ID"] for j in jobs]


def _wait_settled(api: ApiClient, job_ids: list[str], timeout_s: float = 60.0) -> None:
    """Until no eval of these jobs is pending (each finished: complete, or blocked)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = [
            e
            for e in api.get("/v1/evaluations")
            if e["JobID"] in job_ids and e["Status"] == "pending"
        ]
        if not pending:
            return
        time.sleep(0.2)
    raise TimeoutError(f"evaluations still pending after {timeout_s:.0f}s")


def _report_placements(api: ApiClient, system: DroverSystem, job_ids: list[str]) -> None:
    stats = system.client().leader_stats()
    workers = ray.get([w.stats.remote() for w in system.workers])
    # Plans the workers retried, and those of the evals the leader scheduled itself.
    refreshes = sum(w["refreshes"] for w in workers) + stats["local_refreshes"]
    rebased = sum(w["rebased_plans"] for w in workers)
    placed = sum(len(api.get(f"/v1/job/{j}/allocations")) for j in job_ids)
    print(
        f"   {placed} allocations placed by {stats['plans']} plans; "
        f"{stats['partial_plans']} plans partially rejected at the leader "
        f"({stats['rejected_nodes']} node conflicts) -> refreshed and retried "
        f"{refreshes} times; {rebased} moved off nodes filled meanwhile before "
        f"submission; every evaluation finished\n"
    )


def _counts(api: ApiClient, job_id: str) -> str:
    job = api.get(f"/v1/job/{job_id}")
    return ", ".join(f"{tg['Name']}={tg['Count']}" for tg in job["TaskGroups"])


def _await_eval(api: ApiClient, reply: dict[str, Any]) -> None:
    eval_id = reply.get("EvalID")
    deadline = time.monotonic() + 30
    while eval_id and time.monotonic() < deadline:
        if api.get(f"/v1/evaluation/{eval_id}")["Status"] != "pending":
            return
        time.sleep(0.1)


def _settle_deployment(api: ApiClient, job_id: str, timeout_s: float = 90.0) -> None:
    """Wait for the job's deployment to end, promoting its canaries once they are healthy
    (as `drover deployment promote` would); prints what it did."""
    deadline = time.monotonic() + timeout_s
    promoted = ""
    while time.monotonic() < deadline:
        deployment = api.get(f"/v1/job/{job_id}/deployment")
        if deployment is None or deployment["Status"] not in ("running", "paused"):
            if deployment is not None:
                print(f"   deployment {deployment['ID'][:8]}: {deployment['StatusDescription']}")
            return
        groups = deployment["TaskGroups"].values()
        waiting = [g for g in groups if g["DesiredCanaries"] and not g["Promoted"]]
        ready = waiting and all(g["HealthyAllocs"] >= g["DesiredCanaries"] for g in waiting)
        if ready and promoted != deployment["ID"]:
            api.post(f"/v1/deployment/promote/{deployment['ID']}", {"All": True})
            promoted = deployment["ID"]
            print(f"   deployment {promoted[:8]}: canaries healthy, promoted")
        time.sleep(0.2)
    raise TimeoutError(f"the deployment of {job_id} did not end in {timeout_s:.0f}s")


def _lifecycle(api: ApiClient) -> None:
    print("3. `job scale` raises web's api (as an autoscaler would); `job run` resets it;")
    print("   -preserve-counts keeps it")
    web = job_to_nomad(parse_job_file(EXAMPLES / "web.nomad"))
    group = web["TaskGroups"][1]  # "api": the group with a scaling block
    target = group["Scaling"]["Max"] if group.get("Scaling") else group["Count"] + 2

    def scale(message: str) -> None:
        _settle_deployment(api, "web")  # Nomad refuses to scale during a deployment
        body = {"Count": target, "Target": {"Group": group["Name"]}, "Message": message}
        _await_eval(api, api.post("/v1/job/web/scale", body))
        print(f"   after scale {group['Name']} to {target}: {_counts(api, 'web')}")

    def run(release: str, preserve: bool) -> None:
        changed = {**web, "Meta": {**(web.get("Meta") or {}), "release": release}}
        _await_eval(api, api.post("/v1/jobs", {"Job": changed, "PreserveCounts": preserve}))
        label = "job run -preserve-counts" if preserve else "job run (changed file)"
        print(f"   after {label}: {_counts(api, 'web')}")

    scale("autoscaler: cpu high")
    run("2", preserve=False)
    scale("autoscaler again")
    run("3", preserve=True)

    print("\n4. Stop and revert (Nomad #24957: v1 must read dead, the revert running)")
    _await_eval(api, api.delete("/v1/job/web-1"))
    _await_eval(api, api.post("/v1/job/web-1/revert", {"JobID": "web-1", "JobVersion": 0}))
    deadline = time.monotonic() + 30
    while True:
        versions = api.get("/v1/job/web-1/versions")["Versions"]
        line = ", ".join(f"v{v['Version']} {v['Status']}" for v in versions)
        if versions[0]["Status"] == "running" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    print(f"   web-1 versions: {line}")


def _autoscaler_loop(api: ApiClient, timeout_s: float = 90.0) -> None:
    """Submit the autoscaled service and follow its count until the spike has come and gone
    (the autoscaler acts on its own: nothing here calls scale)."""
    print("\n5. The autoscaler at work (examples/autoscale.nomad: demand spikes 5-25 s in)")
    job = job_to_nomad(parse_job_file(AUTOSCALED))
    group = job["TaskGroups"][0]["Name"]
    _await_eval(api, api.post("/v1/jobs", {"Job": job}))
    # Placed is not yet running: the spike is timed from when the agents run its count.
    deadline = time.monotonic() + timeout_s
    while _running(api, job["ID"]) < job["TaskGroups"][0]["Count"]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    started = time.monotonic()
    seen = [_running(api, job["ID"])]
    print(f"   t={0:>4.0f}s  {group}: {seen[0]} running")
    while time.monotonic() - started < timeout_s:
        time.sleep(0.5)
        running = _running(api, job["ID"])
        if running != seen[-1]:
            seen.append(running)
            print(f"   t={time.monotonic() - started:>4.0f}s  {group}: {running} running")
        if len(seen) > 1 and max(seen) > seen[0] and running == seen[0]:
            break  # up, and back down to where it started
    events = api.get(f"/v1/job/{job['ID']}/scale")["TaskGroups"][group]["Events"]
    for event in reversed(events[:4]):  # newest first, as Nomad lists them
        print(f"   scaling event: {event['PreviousCount']} -> {event['Count']}: {event['Message']}")
    stubs = api.get("/v1/scaling/policies", job=job["ID"])
    if stubs:
        explained = api.get(f"/v1/scaling/policy/{stubs[0]['ID']}/decisions", limit=50)
        scaled = [d for d in explained["Decisions"] if d["Outcome"] == "scale"][:1]
        if scaled:
            print(f"\n   drover scaling policy explain {job['ID']} {group} (the last scale-down):")
            print(textwrap.indent(explain_decision(scaled[0]), "   "))


def _running(api: ApiClient, job_id: str) -> int:
    allocs = api.get(f"/v1/job/{job_id}/allocations")
    return sum(1 for a in allocs if a["ClientStatus"] == "running" and a["DesiredStatus"] == "run")


def _print_status(api: ApiClient) -> None:
    rows = []
    for job in api.get("/v1/jobs"):
        # Escaped: a periodic job's children are named <job>/periodic-<launch time>.
        allocs = api.get(f"/v1/job/{segment(job['ID'])}/allocations")
        live = [a for a in allocs if a["DesiredStatus"] == "run"]
        running = sum(1 for a in live if a["ClientStatus"] == "running")
        rows.append((job["ID"], job["Type"], job["Status"], len(live), running, job["Version"]))
    print(table(["Job", "Type", "Status", "Allocs", "Running", "Version"], rows))
