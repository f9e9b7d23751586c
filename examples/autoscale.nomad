# A service the autoscaler scales (Nomad Autoscaler's policy syntax, unchanged).
# The mock task declares the demand it sees: 300 MHz for the whole group, 1,500 MHz for
# 20 s from t = 5 s, split among the group's running allocations. Each allocation has
# 250 MHz, so avg_cpu-allocated (CPU used as a percentage of CPU allocated) crosses the
# target of 70 when the spike comes and falls well below it when it goes.
job "shop" {
  datacenters = ["dc1", "dc2"]
  type        = "service"

  group "api" {
    count = 2

    scaling {
      min     = 2
      max     = 12
      enabled = true

      policy {
        evaluation_interval = "1s"
        cooldown            = "5s"

        check "cpu" {
          source       = "drover"
          query        = "avg_cpu-allocated"
          query_window = "2s"

          strategy "target-value" {
            target = 70
          }
        }
      }
    }

    task "server" {
      driver = "mock"

      config {
        load = {
          shape    = "spike"
          base     = 300
          peak     = 1500
          at       = "5s"
          duration = "20s"
        }
      }

      resources {
        cpu    = 250
        memory = 64
      }
    }
  }
}
