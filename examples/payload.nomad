# A parameterized batch job whose task reads what its dispatch carried: the client writes the
# payload to the task's local/input.txt before the task starts (Nomad's dispatch_payload).
# raw_exec runs on the dev agent's own node (`drover agent -dev` enables it, as Nomad's -dev).
job "wordcount" {
  type        = "batch"
  datacenters = ["dc1"]

  parameterized {
    payload = "required"
  }

  group "count" {
    task "wc" {
      driver = "raw_exec"

      config {
        command = "wc"
        args    = ["-w", "local/input.txt"]
      }

      dispatch_payload {
        file = "input.txt"
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
