-- wrk script: POSTs each pre-built body of BODIES (one JSON per line) once, in order, per thread.
-- A body used twice would fail (its challenge is single use), so with THREADS set each thread
-- takes every THREADS-th line; without it every thread replays every line (bodies that may repeat).
local bodies, index, step = {}, 0, 1
function setup(thread)
  thread:set("id", setup_count or 0)
  setup_count = (setup_count or 0) + 1
end
function init(args)
  local path = os.getenv("BODIES")
  local n = 0
  for line in io.lines(path) do
    local threads = tonumber(os.getenv("THREADS") or "0")
    if threads == 0 or (n % threads) == id then bodies[#bodies + 1] = line end
    n = n + 1
  end
  wrk.method = os.getenv("METHOD") or "POST"
  wrk.headers["Content-Type"] = "application/json"
  if os.getenv("TOKEN") then wrk.headers["Authorization"] = "Bearer " .. os.getenv("TOKEN") end
end
function request()
  index = index + 1
  local body = bodies[((index - 1) % #bodies) + 1]
  return wrk.format(nil, nil, nil, body)
end
function done(summary, latency, requests)
  io.write(string.format("p50 %.1f ms  p99 %.1f ms  p99.9 %.1f ms  non-2xx %d\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000,
    summary.errors.status))
end
