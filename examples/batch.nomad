# A batch job: runs to completion; reschedules once a day at most (Nomad's batch default).
job "nightly-report" {
  type        = "batch"
  datacenters = ["dc1"]

  group "report" {
    count = 4

    task "render" {
      driver = "mock"

      config {
        run_for   = "30s"
        exit_code = 0
      }

      resources {
        cpu    = 200
        memory = 64
      }
    }

    task "upload" {
      driver = "mock"

      config {
        run_for   = "5s"
        exit_code = 0
      }
    }
  }
}
