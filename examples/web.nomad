# A service job: two groups behind one update strategy.
# `api` has no count, so it starts at its scaling block's min (Nomad's rule).
job "web" {
  datacenters = ["dc1", "dc2"]
  type        = "service"
  priority    = 60

  meta {
    team = "frontend"
  }

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  # Copied into every group that has no update block of its own.
  update {
    max_parallel     = 2
    stagger          = "15s"
    min_healthy_time = "2s"
    healthy_deadline = "2m"
  }

  group "frontend" {
    count = 3

    affinity {
      attribute = "${node.class}"
      value     = "web"
      weight    = 70
    }

    spread {
      attribute = "${node.datacenter}"
      weight    = 100

      target "dc1" {
        percent = 60
      }

      target "dc2" {
        percent = 40
      }
    }

    task "nginx" {
      driver = "mock"

      config {
        run_for = "1h"
      }

      env {
        PORT = "8080"
      }

      resources {
        cpu    = 250
        memory = 128
      }
    }
  }

  group "api" {
    scaling {
      min     = 2
      max     = 10
      enabled = true

      policy {
        cooldown            = "1m"
        evaluation_interval = "30s"

        check "avg_cpu" {
          source = "nomad-apm"
          query  = "avg_cpu"

          strategy "target-value" {
            target = 70
          }
        }
      }
    }

    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    update {
      max_parallel = 1
      canary       = 1
    }

    reschedule {
      attempts  = 3
      interval  = "1h"
      delay     = "10s"
      unlimited = false
    }

    ephemeral_disk {
      size = 500
    }

    task "server" {
      driver       = "mock"
      kill_timeout = "20s"

      config {
        run_for = "1h"
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
