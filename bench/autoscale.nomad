# bench.autoscale's mock service (bench/autoscale.py sets its ID, count, load and policy
# timings per job). Each allocation has 100 MHz and the policy holds avg_cpu-allocated at
# 50 %, so every 50 MHz of the group's demand settles one allocation: the constant 100 MHz
# below settles at 2. The bench replaces `load` with a square-wave trace, or a constant
# demand near the target with noise.
job "wave" {
  datacenters = ["dc1"]
  type        = "service"

  group "app" {
    count = 2

    scaling {
      min     = 1
      max     = 10
      enabled = true

      policy {
        evaluation_interval = "1s"
        cooldown            = "3s"

        check "cpu" {
          source       = "drover"
          query        = "avg_cpu-allocated"
          query_window = "2s"

          strategy "target-value" {
            target    = 50
            threshold = 0.1
          }
        }
      }
    }

    task "srv" {
      driver = "mock"

      config {
        load = {
          shape = "constant"
          base  = 100
        }
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
