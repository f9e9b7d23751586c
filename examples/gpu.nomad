# A GPU training job: each allocation needs two NVIDIA GPUs with at least 40 GiB each.
job "train" {
  type        = "batch"
  datacenters = ["dc1"]

  group "trainer" {
    count = 2

    task "train" {
      driver = "mock"

      config {
        run_for   = "10m"
        exit_code = 0
      }

      resources {
        cpu    = 4000
        memory = 16384

        device "nvidia/gpu" {
          count = 2

          constraint {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "40 GiB"
          }

          affinity {
            attribute = "${device.model}"
            value     = "H100"
            weight    = 50
          }
        }
      }
    }
  }
}
