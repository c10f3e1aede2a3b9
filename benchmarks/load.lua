-- wrk script: a realistic mixed profile for the Casebook, or one request type alone.
--
-- MIX=mixed (default): per cycle of 20 requests, what a mix of browsers, API clients and agents sends:
--   4 lists, 4 gets, 2 searches (English, Chinese), 3 HTML pages, 3 single calculations,
--   1 sweep of 1,000 points, 2 MCP tools/call (streamable HTTP, stateless, JSON answers), 1 calculator schema.
-- MIX=<type> (list, get, search, html, calc, sweep, mcp, kv): that type only, to find the slow ones.
-- The summary line (RESULT ...) gives requests/s, p50/p90/p99 latency and errors (socket errors plus
-- answers with status >= 400).
local mix = os.getenv("MIX") or "mixed"

local function json_headers(extra)
  local h = {["Content-Type"] = "application/json"}
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local tokens = {}
for i = 1, 1000 do tokens[i] = tostring(1024 + 64 * (i - 1)) end
local sweep = '{"model":"qwen3-8b","tokens":[' .. table.concat(tokens, ",") .. ']}'
local mcp_headers = json_headers({["Accept"] = "application/json, text/event-stream",
                                  ["MCP-Protocol-Version"] = "2025-06-18"})
local function mcp_call(id, name, arguments)
  return string.format('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}',
                       id, name, arguments)
end

-- type -> list of {method, path, headers, body}
local by_type = {
  list = {
    {"GET", "/api/v1/models?family=qwen&limit=10"},
    {"GET", "/api/v1/hardware?vendor=NVIDIA&limit=20"},
    {"GET", "/api/v1/cases?chapter=8"},
    {"GET", "/api/v1/links"},
  },
  get = {
    {"GET", "/api/v1/models/qwen3-8b"},
    {"GET", "/api/v1/hardware/h100-sxm"},
    {"GET", "/api/v1/cases/multi-lora-serving"},
    {"GET", "/api/v1/models/llama-3.1-70b"},
  },
  search = {
    {"GET", "/api/v1/search?q=kv%20cache"},
    {"GET", "/api/v1/search?q=%E6%8E%A8%E6%B5%8B%E8%A7%A3%E7%A0%81"},   -- 推测解码
  },
  html = {
    {"GET", "/"},
    {"GET", "/models/qwen3-8b"},
    {"GET", "/cases/multi-lora-serving"},
  },
  calc = {
    {"POST", "/api/v1/calculators/kv-cache", json_headers(), '{"model":"qwen3-8b","tokens":8192}'},
    {"POST", "/api/v1/calculators/edge-transfer", json_headers(),
     '{"upload_bytes":30e6,"download_bytes":5e6,"uplink_bits_per_s":20e6,"downlink_bits_per_s":100e6,"rtt_s":0.1,"processing_s":0.3}'},
    {"POST", "/api/v1/calculators/roofline", json_headers(),
     '{"model":"qwen3-8b","phase":"decode","batch":8,"context_tokens":4096,"hardware":"h100-sxm","precision":"BF16"}'},
  },
  sweep = {
    {"POST", "/api/v1/calculators/kv-cache", json_headers(), sweep},
  },
  mcp = {
    {"POST", "/mcp", mcp_headers, mcp_call(1, "kv_cache", '{"model":"qwen3-8b","tokens":8192}')},
    {"POST", "/mcp", mcp_headers, mcp_call(2, "get_model", '{"id":"qwen3-8b"}')},
  },
  schema = {
    {"GET", "/api/v1/calculators/kv-cache"},
  },
  kv = {
    {"POST", "/api/v1/calculators/kv-cache", json_headers(), '{"model":"qwen3-8b","tokens":8192}'},
  },
}
-- the mixed cycle: type and how many of its requests per 20
local cycle = {{"list", 4}, {"get", 4}, {"search", 2}, {"html", 3}, {"calc", 3}, {"sweep", 1}, {"mcp", 2}, {"schema", 1}}

-- built in init(): wrk sets the Host header there, and wrk.format copies it into each request
local requests = {}
local function add(r)
  table.insert(requests, wrk.format(r[1], r[2], r[3] or {}, r[4]))
end
local function build()
  if mix == "mixed" then
    local next_of = {}
    for _, c in ipairs(cycle) do
      local name, n = c[1], c[2]
      for _ = 1, n do
        local list = by_type[name]
        local k = (next_of[name] or 0) % #list + 1
        next_of[name] = k
        add(list[k])
      end
    end
  elseif by_type[mix] then
    for _, r in ipairs(by_type[mix]) do add(r) end
  else
    error("MIX must be mixed or one of: list get search html calc sweep mcp schema kv")
  end
end

-- each thread starts at its own place in the cycle
local i = 0
setup = function(thread)
  thread:set("start", math.random(20))
end
init = function(args)   -- called by wrk.init once it has set wrk.headers.Host
  build()
  i = ((start or 1) - 1) % #requests
end
request = function()
  i = i % #requests + 1
  return requests[i]
end

-- SHOW_ERRORS=1: print the first few failed answers (costs the load generator some CPU, so off by default)
if os.getenv("SHOW_ERRORS") then
  local failed = 0
  response = function(status, headers, body)
    if status >= 400 then
      failed = failed + 1
      if failed <= 3 then io.stderr:write("status " .. status .. ": " .. string.sub(body or "", 1, 300) .. "\n") end
    end
  end
end

done = function(summary, latency, requests_)
  local e = summary.errors
  io.write(string.format(
    "RESULT mix=%s requests=%d duration_s=%.1f rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.1f errors=%d " ..
    "(status>=400 %d; socket: connect %d, read %d, write %d, timeout %d)\n",
    mix, summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    e.connect + e.read + e.write + e.timeout + e.status, e.status, e.connect, e.read, e.write, e.timeout))
end
