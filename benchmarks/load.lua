-- wrk script: a mix of list, get, search and calculator calls, or one kv-cache call when
-- the environment variable MIX is "kv".
local mix = os.getenv("MIX") or "mixed"
local kv = '{"model":"qwen3-8b","tokens":8192}'
local requests = {}
local function add(method, path, body)
  local headers = {}
  if body then headers["Content-Type"] = "application/json" end
  table.insert(requests, wrk.format(method, path, headers, body))
end
if mix == "kv" then
  add("POST", "/api/v1/calculators/kv-cache", kv)
else
  add("GET", "/api/v1/models?family=qwen&limit=10")
  add("GET", "/api/v1/hardware?vendor=NVIDIA&limit=20")
  add("GET", "/api/v1/cases?chapter=8")
  add("GET", "/api/v1/models/qwen3-8b")
  add("GET", "/api/v1/hardware/h100-sxm")
  add("GET", "/api/v1/cases/multi-lora-serving")
  add("GET", "/api/v1/search?q=kv%20cache")
  add("POST", "/api/v1/calculators/kv-cache", kv)
  add("POST", "/api/v1/calculators/kv-cache", kv)
  add("POST", "/api/v1/calculators/edge-transfer",
      '{"upload_bytes":30e6,"download_bytes":5e6,"uplink_bits_per_s":20e6,"downlink_bits_per_s":100e6,"rtt_s":0.1,"processing_s":0.3}')
end
local i = 0
request = function()
  i = i % #requests + 1
  return requests[i]
end
local non2xx = 0
response = function(status, headers, body)
  if status >= 300 then non2xx = non2xx + 1 end
end
done = function(summary, latency, requests_)
  io.write(string.format("RESULT mix=%s requests=%d duration_s=%.1f rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f errors=%d\n",
    mix, summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout + summary.errors.status))
end
