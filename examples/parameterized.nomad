# A parameterized batch job: never scheduled itself; each `drover job dispatch` makes a
# child job (convert/dispatch-<unix time>-<8 hex>) with the dispatch's meta and payload.
job "convert" {
  type        = "batch"
  datacenters = ["dc1"]

  parameterized {
    payload       = "optional"
    meta_required = ["input"]
    meta_optional = ["format"]
  }

  group "convert" {
    task "convert" {
      driver = "mock"

      config {
        run_for = "5s"
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
