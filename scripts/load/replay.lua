-- wrk script for every run of the load harness (scripts/load/run.py).
--   BODIES   file of request bodies, one JSON per line (unset: the request as wrk's command line has it)
--   THREADS  with BODIES: each of the THREADS threads takes every THREADS-th line and sends each
--            once (a login's challenge is single use); when its lines run out the thread stops
--            early rather than replay one (a replay would fail and make the run invalid).
--            Unset: every thread cycles through every line (bodies that may repeat).
--   TOKENS   file of bearer tokens, one per line, used in turn.
--   SPREAD   set: each request comes from another client address (X-Forwarded-For, for a server
--            that trusts 127.0.0.1 as its proxy), as a crowd of clients would.
-- done() prints one machine-readable line: RESULT requests/s p50 p99 p99.9 (ms) non-2xx errors.
local bodies, tokens, index, once, spread = {}, {}, 0, false, false
function setup(thread)
  thread:set("id", setup_count or 0)
  setup_count = (setup_count or 0) + 1
end
function init(args)
  local threads = tonumber(os.getenv("THREADS") or "0")
  once = threads > 0
  if os.getenv("BODIES") then
    local n = 0
    for line in io.lines(os.getenv("BODIES")) do
      if threads == 0 or (n % threads) == id then bodies[#bodies + 1] = line end
      n = n + 1
    end
  end
  if os.getenv("TOKENS") then
    for line in io.lines(os.getenv("TOKENS")) do if #line > 0 then tokens[#tokens + 1] = line end end
  end
  wrk.headers["Content-Type"] = "application/json"
  if #bodies > 0 then wrk.method = "POST" end
  spread = os.getenv("SPREAD") ~= nil
end
function request()
  index = index + 1
  local headers = nil
  if spread then
    return wrk.format(nil, nil, { ["X-Forwarded-For"] = string.format("10.%d.%d.%d", id, math.floor(index / 256) % 256, index % 256) }, nil)
  end
  if #tokens > 0 then
    -- wrk.format's headers replace wrk.headers: carry the content type along.
    headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. tokens[((index - 1) % #tokens) + 1] }
  end
  if #bodies == 0 then return wrk.format(nil, nil, headers, nil) end
  if once and index > #bodies then
    wrk.thread:stop()
    return wrk.format("GET", "/bench/echo", nil, nil)
  end
  return wrk.format(nil, nil, headers, bodies[((index - 1) % #bodies) + 1])
end
function done(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %.0f %.2f %.2f %.2f %d %d %.2f\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, summary.errors.status, errors, summary.duration / 1e6))
end
