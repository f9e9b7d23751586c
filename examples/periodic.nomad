# A periodic batch job: the leader launches a child job (report/periodic-<unix time>) every
# 15 minutes, Berlin time, and skips a launch while the previous child still runs.
job "report" {
  type        = "batch"
  datacenters = ["dc1"]

  periodic {
    crons            = ["*/15 * * * *"]
    time_zone        = "Europe/Berlin"
    prohibit_overlap = true
  }

  group "report" {
    task "render" {
      driver = "mock"

      config {
        run_for = "20s"
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
