# A system job: one allocation on every eligible Linux node; no scaling block allowed.
job "node-exporter" {
  type        = "system"
  datacenters = ["*"]
  priority    = 70

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  group "exporter" {
    task "exporter" {
      driver = "mock"

      config {
        run_for = "24h"
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
